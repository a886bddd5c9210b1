{{- define "tessera.name" -}}{{ .Release.Name }}-tessera{{- end -}}
{{- define "tessera.labels" -}}
app.kubernetes.io/name: tessera
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
{{- define "tessera.selector" -}}
app.kubernetes.io/name: tessera
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- /* The namespace the host manages: watchNamespace, else the release namespace. */ -}}
{{- define "tessera.watch" -}}{{ .Values.watchNamespace | default .Release.Namespace }}{{- end -}}
{{- define "tessera.project" -}}garden-{{ .Values.chain.project | default "kyma-dev" }}{{- end -}}
{{- /* The image: repository@digest when a digest is set (what `./x image` prints), else repository:tag. */ -}}
{{- define "tessera.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* "true" when the replicas shard the objects (sharding: auto means more than one replica), else "". */}}
{{- define "tessera.sharding" -}}
{{- $s := toString .Values.sharding -}}
{{- if eq $s "<nil>" }}{{ $s = "auto" }}{{ end -}}
{{- if or (eq $s "true") (and (eq $s "auto") (gt (int .Values.replicaCount) 1)) -}}
true
{{- else if not (or (eq $s "false") (eq $s "auto")) -}}
{{- fail (printf "sharding must be auto, true or false, got %q" $s) -}}
{{- end -}}
{{- end }}
