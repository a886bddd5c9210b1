//! The decisions of a pass over a set, apart from the calls that carry them out: which
//! version each module runs, whether it may run in this pass, how its result reads, what
//! left the set and in which order it goes. Every function here answers from the spec, the
//! inventory and the catalog's answers alone, so each decision is tested without a cluster.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::{DEFAULT_CHANNEL, ModuleReport, Notice, SetRequest, State, merge_config};
use crate::crd::Mandatory;
use crate::crd::moduleset::ModuleSpec;
use crate::modules::windows::Maintenance;
use crate::plugins::CatalogWake;

/// Look again this soon at a module waiting for a dependent to be removed first.
pub(crate) const WAIT_FOR_DEPENDENT: Duration = Duration::from_secs(2);
/// Look again this soon at a module still being removed that named no time.
pub(crate) const REMOVAL_REQUEUE: Duration = Duration::from_secs(5);

/// What the plan needs of a plugin version (a `Candidate`, or a fake in tests).
pub(crate) trait Offer {
    fn version(&self) -> &str;
    /// The channel permits going below the installed version.
    fn allows_downgrade(&self) -> bool;
    /// The Plugin's configuration, the base of the module's.
    fn defaults(&self) -> Option<&Value>;
    /// Keys of the defaults the module's configuration may not replace.
    fn locked_config(&self) -> &[String];
    /// The ModuleSets the module is offered to; `None`: every set.
    fn module_set_selector(&self) -> Option<&LabelSelector>;
    /// Upgrading to this version waits for a maintenance window.
    fn requires_downtime(&self) -> bool;
}

/// The catalog's answers, as far as the plan needs them.
pub(crate) trait Offers {
    type Offer: Offer;
    /// The version `channel` offers for `module`, or why there is none.
    fn resolve(&self, module: &str, channel: &str) -> Result<Self::Offer, String>;
    /// One specific version (to keep the installed one when a downgrade is refused).
    fn version(&self, module: &str, version: &str) -> Option<Self::Offer>;
}

/// A module that runs in this pass.
#[derive(Debug)]
pub(crate) struct Run<C> {
    /// The channel the version came from.
    pub(crate) channel: String,
    pub(crate) candidate: C,
    /// The module's configuration, JSON.
    pub(crate) config: String,
    /// The set allows taking over existing objects.
    pub(crate) adopt: bool,
    /// Why the channel's version was not taken (a refused downgrade): reported as Warning.
    pub(crate) held: Option<String>,
    /// The version is the set's pin (`modules[].version`), not the channel's.
    pub(crate) pinned: bool,
    /// What the channel offers, when the module runs another version.
    pub(crate) channel_version: Option<String>,
    /// An upgrade that waits for the maintenance window, in words.
    pub(crate) pending: Option<String>,
}

/// What the pass does with the modules of the spec.
#[derive(Debug)]
pub(crate) struct Plan<C> {
    /// Modules to run, by name.
    pub(crate) run: BTreeMap<String, Run<C>>,
    /// Modules no longer managed: their inventory record is forgotten, their objects left.
    pub(crate) unmanaged: Vec<String>,
    /// Modules settled without running (unmanaged, unresolvable, misconfigured, held back).
    pub(crate) reports: BTreeMap<String, ModuleReport>,
    /// Refused downgrades, in the spec's order.
    pub(crate) notices: Vec<Notice>,
}

/// The modules a pass wants: none while the set is being deleted.
pub(crate) fn wanted<'a>(req: &SetRequest<'a>) -> &'a [ModuleSpec] {
    if req.deleting { &[] } else { req.modules }
}

/// Plan the wanted modules of `req`; `installed` maps modules to their installed version.
pub(crate) fn plan<S: Offers>(
    source: &S,
    req: &SetRequest<'_>,
    installed: &BTreeMap<String, String>,
) -> Plan<S::Offer> {
    let mut plan = Plan {
        run: BTreeMap::new(),
        unmanaged: Vec::new(),
        reports: BTreeMap::new(),
        notices: Vec::new(),
    };
    for spec in wanted(req) {
        let name = spec.name.clone();
        if !spec.managed.unwrap_or(true) {
            let message = "not managed: its objects are left as they are, without Tessera's labels";
            plan.reports
                .insert(name.clone(), report(&name, State::Unmanaged, message));
            plan.unmanaged.push(name);
            continue;
        }
        let (step, notice) = plan_module(source, req, spec, installed.get(&name));
        plan.notices.extend(notice);
        match step {
            Step::Run(run) => {
                plan.run.insert(name, run);
            }
            Step::Settled(report) => {
                plan.reports.insert(name, report);
            }
        }
    }
    plan
}

/// The modules a set wants: its own, and the mandatory ones whose selector its `labels`
/// match. A mandatory module the set lists keeps the set's configuration but runs managed,
/// at the mandatory version. Returns the modules and the names of the mandatory ones.
pub(crate) fn with_mandatory(
    own: &[ModuleSpec],
    mandatory: &[(String, Mandatory)],
    labels: &BTreeMap<String, String>,
) -> (Vec<ModuleSpec>, BTreeSet<String>) {
    use kube::core::SelectorExt;
    let mut modules = own.to_vec();
    let mut names = BTreeSet::new();
    for (name, m) in mandatory {
        let matches = match &m.module_set_selector {
            // Refused in the Plugin's status; matching nothing keeps it off every set.
            Some(s) => kube::core::Selector::try_from(s.clone()).is_ok_and(|s| s.matches(labels)),
            None => true,
        };
        if !matches {
            continue;
        }
        names.insert(name.clone());
        let forced = |spec: &mut ModuleSpec| {
            spec.version = Some(m.version.clone());
            spec.managed = None;
        };
        match modules.iter_mut().find(|s| &s.name == name) {
            Some(spec) => forced(spec),
            None => {
                let mut spec = ModuleSpec::named(name);
                forced(&mut spec);
                modules.push(spec);
            }
        }
    }
    (modules, names)
}

/// What becomes of one managed module in this pass.
enum Step<C> {
    Run(Run<C>),
    /// Settled without running.
    Settled(ModuleReport),
}

/// One managed module: the version it runs and its configuration, or the report that
/// settles it without running; and the refused downgrade to announce, if any.
fn plan_module<S: Offers>(
    source: &S,
    req: &SetRequest<'_>,
    spec: &ModuleSpec,
    installed: Option<&String>,
) -> (Step<S::Offer>, Option<Notice>) {
    let name = &spec.name;
    let channel = channel_of(spec, req.channel);
    let channel_offer = source.resolve(name, &channel);
    let offered = match (&spec.version, channel_offer) {
        (Some(pinned), channel_offer) => match source.version(name, pinned) {
            Some(offer) => Offered::pinned(offer, channel_offer.ok()),
            None => {
                let message = format!(
                    "version {pinned} (modules[].version) is not a version of Plugin {name} that loaded: pin one its spec.versions lists"
                );
                return (Step::Settled(report(name, State::Error, message)), None);
            }
        },
        (None, Ok(offer)) => Offered::channel(offer),
        (None, Err(message)) => return (Step::Settled(report(name, State::Error, message)), None),
    };
    if let Some(message) = refused_here(name, &offered.offer, req.labels) {
        return (Step::Settled(report(name, State::Error, message)), None);
    }
    let Some(installed) = refused_downgrade(installed, &offered.offer, req.allow_downgrade) else {
        return (
            wait_for_window(source, req, spec, channel, offered, installed),
            None,
        );
    };
    let version = offered.offer.version().to_string();
    let notice = Notice::DowngradeRefused {
        module: name.clone(),
        offered: version.clone(),
        installed: installed.to_string(),
    };
    let what = if offered.pinned {
        format!("the pinned version {version} is")
    } else {
        format!("channel {channel} offers {version},")
    };
    let message = format!("{what} lower than the installed {installed}: kept {installed}");
    match source.version(name, installed) {
        Some(kept) => {
            let kept = Offered {
                offer: kept,
                pinned: false,
                channel_version: Some(version),
            };
            (configured(spec, channel, kept, Some(message)), Some(notice))
        }
        None => {
            let mut r = report(name, State::Warning, message);
            r.version = Some(installed.to_string());
            r.channel = Some(channel);
            (Step::Settled(r), Some(notice))
        }
    }
}

/// Why a restricted module is not offered to a set with `labels` (fail closed: a selector
/// that does not parse offers it to none).
fn refused_here(
    name: &str,
    offer: &impl Offer,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    use kube::core::SelectorExt;
    let selector = offer.module_set_selector()?;
    match kube::core::Selector::try_from(selector.clone()) {
        Ok(s) if s.matches(labels) => None,
        Ok(s) => Some(format!(
            "module {name} is restricted to ModuleSets with labels matching `{s}` (Plugin {name} spec.moduleSetSelector); this set's labels do not match"
        )),
        Err(e) => Some(format!("Plugin {name} spec.moduleSetSelector: {e}")),
    }
}

/// Run `offered`, unless it is an upgrade that needs downtime outside the maintenance
/// window: then the installed version runs and the upgrade is reported as pending.
fn wait_for_window<S: Offers>(
    source: &S,
    req: &SetRequest<'_>,
    spec: &ModuleSpec,
    channel: String,
    offered: Offered<S::Offer>,
    installed: Option<&String>,
) -> Step<S::Offer> {
    let version = offered.offer.version().to_string();
    let opens = match req.maintenance {
        Maintenance::Closed { opens } if offered.offer.requires_downtime() => opens,
        _ => return configured(spec, channel, offered, None),
    };
    let Some(installed) = installed.filter(|i| **i != version) else {
        // A first install takes nothing down.
        return configured(spec, channel, offered, None);
    };
    let pending = format!("{version} needs downtime: waits for the maintenance window at {opens}");
    let Some(kept) = source.version(&spec.name, installed) else {
        let mut r = report(&spec.name, State::Warning, pending.clone());
        r.version = Some(installed.clone());
        r.pending_upgrade = Some(pending);
        return Step::Settled(r);
    };
    let kept = Offered {
        offer: kept,
        pinned: offered.pinned,
        channel_version: Some(version),
    };
    match configured(spec, channel, kept, None) {
        Step::Run(mut run) => {
            run.pending = Some(pending);
            Step::Run(run)
        }
        settled => settled,
    }
}

/// The version a module is offered, and where from.
struct Offered<C> {
    offer: C,
    pinned: bool,
    /// What the channel offers, when it is not `offer`.
    channel_version: Option<String>,
}

impl<C: Offer> Offered<C> {
    fn channel(offer: C) -> Self {
        Self {
            offer,
            pinned: false,
            channel_version: None,
        }
    }

    fn pinned(offer: C, channel: Option<C>) -> Self {
        let channel_version = channel
            .map(|c| c.version().to_string())
            .filter(|v| v != offer.version());
        Self {
            offer,
            pinned: true,
            channel_version,
        }
    }
}

/// `offered` with the module's configuration merged over its defaults, or settled as
/// Error naming a locked key the set tries to replace.
fn configured<C: Offer>(
    spec: &ModuleSpec,
    channel: String,
    offered: Offered<C>,
    held: Option<String>,
) -> Step<C> {
    let candidate = offered.offer;
    let merged = merge_config(
        candidate.defaults(),
        spec.config.as_ref(),
        candidate.locked_config(),
    );
    match merged {
        Ok(config) => Step::Run(Run {
            channel,
            config: config.to_string(),
            candidate,
            adopt: spec.adopt.unwrap_or(false),
            held,
            pinned: offered.pinned,
            channel_version: offered.channel_version,
            pending: None,
        }),
        Err(message) => Step::Settled(report(&spec.name, State::Error, message)),
    }
}

/// The module's channel: its own, else the set's, else [`DEFAULT_CHANNEL`].
pub(crate) fn channel_of(spec: &ModuleSpec, set_channel: Option<&str>) -> String {
    spec.channel
        .clone()
        .unwrap_or_else(|| set_channel.unwrap_or(DEFAULT_CHANNEL).to_string())
}

/// Whether `wake` can change a pass over a set of `modules` on channel `set_channel` that
/// last reported `reported`: a module runs the changed plugin on a changed channel, or a
/// module that left the set is still reported (removing it runs its plugin, on whichever
/// version is installed).
pub(crate) fn woken_by(
    modules: &[ModuleSpec],
    set_channel: Option<&str>,
    reported: &[ModuleReport],
    wake: &CatalogWake,
) -> bool {
    // A pinned module runs whichever listed version it names: any change of its Plugin.
    let wanted = modules.iter().any(|m| match m.version {
        Some(_) => wake.touches_plugin(&m.name),
        None => wake.touches(&m.name, &channel_of(m, set_channel)),
    });
    let leaving = reported
        .iter()
        .filter(|r| !modules.iter().any(|m| m.name == r.name))
        .any(|r| wake.touches_plugin(&r.name));
    wanted || leaving
}

/// The installed version, when `offered` is below it and neither the channel nor the set
/// allows going down: that version is kept.
pub(crate) fn refused_downgrade<'i>(
    installed: Option<&'i String>,
    offered: &impl Offer,
    set_allows: bool,
) -> Option<&'i str> {
    let installed = installed?;
    let lower = newer(installed, offered.version());
    (lower && !offered.allows_downgrade() && !set_allows).then_some(installed.as_str())
}

/// Whether `a` is a higher version than `b` (anything that is no version never is).
pub(crate) fn newer(a: &str, b: &str) -> bool {
    crate::version::is_downgrade(a, b)
}

/// Why a planned module does not run in this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    Open,
    /// It can never run as specified (a dependency outside the set, a cycle): Error.
    Refused(String),
    /// A dependency is not Ready yet: Processing, with what is installed left alone.
    Waiting(String),
}

/// Whether module `name` with dependencies `deps` may run, given the modules in the set,
/// those in a dependency cycle and what the modules before it in this pass reported.
pub(crate) fn gate(
    name: &str,
    deps: &[String],
    in_set: &HashSet<&str>,
    cyclic: &HashSet<String>,
    reports: &BTreeMap<String, ModuleReport>,
) -> Gate {
    if let Some(missing) = deps.iter().find(|d| !in_set.contains(d.as_str())) {
        return Gate::Refused(format!(
            "requires module {missing}, which is not in the ModuleSet"
        ));
    }
    if cyclic.contains(name) {
        return Gate::Refused(format!(
            "dependency cycle: {name} requires {}",
            deps.join(", ")
        ));
    }
    let waiting: Vec<&str> = deps
        .iter()
        .filter(|d| reports.get(*d).is_none_or(|r| !r.state.counts_as_ready()))
        .map(String::as_str)
        .collect();
    if waiting.is_empty() {
        Gate::Open
    } else {
        Gate::Waiting(format!("waiting for {} to be Ready", waiting.join(", ")))
    }
}

/// A module's result as its report carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ran {
    pub(crate) state: State,
    pub(crate) message: Option<String>,
    pub(crate) objects: usize,
}

/// How a module that ran reads: a held-back version turns Ready or Processing into Warning;
/// a failed pass counts what the inventory lists (it applied nothing new). The notice
/// announces a move from `previous` to `version` that did not fail.
pub(crate) fn settle(
    name: &str,
    version: &str,
    held: Option<&str>,
    previous: Option<&str>,
    mut ran: Ran,
    installed_objects: usize,
) -> (Ran, Option<Notice>) {
    if let Some(held) = held
        && matches!(ran.state, State::Ready | State::Processing)
    {
        ran.state = State::Warning;
        ran.message = Some(held.to_string());
    }
    let failed = ran.state == State::Error;
    let notice = previous
        .filter(|from| *from != version && !failed)
        .map(|from| Notice::Upgraded {
            module: name.to_string(),
            from: from.to_string(),
            to: version.to_string(),
        });
    if failed {
        ran.objects = installed_objects;
    }
    (ran, notice)
}

/// Installed modules the pass no longer wants (dropped from the spec, or every one while
/// the set is being deleted), in name order.
pub(crate) fn dropped<'i>(
    installed: impl IntoIterator<Item = &'i String>,
    req: &SetRequest<'_>,
) -> Vec<String> {
    let wanted: HashSet<&str> = wanted(req).iter().map(|m| m.name.as_str()).collect();
    installed
        .into_iter()
        .filter(|m| !wanted.contains(m.as_str()))
        .cloned()
        .collect()
}

/// The first module that still requires `name` — another one leaving, else one staying —
/// which must be removed before `name` is.
pub(crate) fn needed_by<'d>(
    name: &str,
    leaving: &'d BTreeMap<String, Vec<String>>,
    staying: &'d BTreeMap<String, Vec<String>>,
) -> Option<&'d str> {
    let requires = |(other, deps): (&'d String, &'d Vec<String>)| {
        (other != name && deps.iter().any(|d| d == name)).then_some(other.as_str())
    };
    leaving
        .iter()
        .find_map(requires)
        .or_else(|| staying.iter().find_map(requires))
}

/// The report of a leaving module that waits for `dependent` to go first.
pub(crate) fn waiting_for_dependent(name: &str, version: &str, dependent: &str) -> ModuleReport {
    let mut r = report(
        name,
        State::Deleting,
        format!("waiting for {dependent} to be removed first"),
    );
    r.version = Some(version.to_string());
    r
}

/// Where the removal of a module stands after one attempt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Removal {
    Gone,
    /// Still there: its report and when to look again.
    Pending(Box<ModuleReport>, Duration),
}

/// Read one removal attempt: `Ready` means gone; an Error stays Error; anything else is
/// still Deleting.
pub(crate) fn removal(name: &str, version: &str, ran: Ran, requeue: Option<Duration>) -> Removal {
    if ran.state == State::Ready {
        return Removal::Gone;
    }
    let state = if ran.state == State::Error {
        State::Error
    } else {
        State::Deleting
    };
    let mut r = report(name, state, ran.message.unwrap_or_default());
    r.version = Some(version.to_string());
    r.objects = ran.objects as u32;
    Removal::Pending(Box::new(r), requeue.unwrap_or(REMOVAL_REQUEUE))
}

/// The reports in status order: the set's modules in its order, then those still being
/// removed.
pub(crate) fn in_status_order(
    specs: &[ModuleSpec],
    mut reports: BTreeMap<String, ModuleReport>,
) -> Vec<ModuleReport> {
    let mut modules: Vec<ModuleReport> = specs
        .iter()
        .filter_map(|spec| reports.remove(&spec.name))
        .collect();
    modules.extend(reports.into_values());
    modules
}

/// A report without version details.
pub(crate) fn report(name: &str, state: State, message: impl Into<String>) -> ModuleReport {
    ModuleReport {
        name: name.to_string(),
        channel: None,
        version: None,
        pinned: false,
        mandatory: false,
        pending_upgrade: None,
        channel_version: None,
        digest: None,
        state,
        message: Some(message.into()),
        objects: 0,
        blocked_by: Vec::new(),
        shadow: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;

    /// A plugin version as the fake catalog offers it.
    #[derive(Debug, Clone, PartialEq)]
    struct Version {
        version: &'static str,
        allows_downgrade: bool,
        defaults: Option<Value>,
        locked: Vec<String>,
        selector: Option<LabelSelector>,
        downtime: bool,
    }

    fn v(version: &'static str) -> Version {
        Version {
            version,
            allows_downgrade: false,
            defaults: None,
            locked: Vec::new(),
            selector: None,
            downtime: false,
        }
    }

    impl Offer for Version {
        fn version(&self) -> &str {
            self.version
        }
        fn allows_downgrade(&self) -> bool {
            self.allows_downgrade
        }
        fn defaults(&self) -> Option<&Value> {
            self.defaults.as_ref()
        }
        fn locked_config(&self) -> &[String] {
            &self.locked
        }
        fn module_set_selector(&self) -> Option<&LabelSelector> {
            self.selector.as_ref()
        }
        fn requires_downtime(&self) -> bool {
            self.downtime
        }
    }

    static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

    /// (module, channel) → offer; (module, version) that can still be run.
    #[derive(Default)]
    struct Catalog {
        channels: HashMap<(&'static str, &'static str), Version>,
        versions: Vec<(&'static str, &'static str)>,
    }

    impl Catalog {
        fn offer(mut self, module: &'static str, channel: &'static str, offer: Version) -> Self {
            self.channels.insert((module, channel), offer);
            self
        }
        fn keeps(mut self, module: &'static str, version: &'static str) -> Self {
            self.versions.push((module, version));
            self
        }
    }

    impl Offers for Catalog {
        type Offer = Version;
        fn resolve(&self, module: &str, channel: &str) -> Result<Version, String> {
            self.channels
                .iter()
                .find(|((m, c), _)| *m == module && *c == channel)
                .map(|(_, offer)| offer.clone())
                .ok_or_else(|| format!("no Plugin {module} on channel {channel}"))
        }
        fn version(&self, module: &str, version: &str) -> Option<Version> {
            self.versions
                .iter()
                .find(|(m, found)| *m == module && *found == version)
                .map(|(_, found)| v(found))
        }
    }

    fn spec(name: &str) -> ModuleSpec {
        ModuleSpec::named(name)
    }

    fn request(modules: &[ModuleSpec]) -> SetRequest<'_> {
        SetRequest {
            set: "ns/set".into(),
            channel: None,
            modules,
            deleting: false,
            allow_downgrade: false,
            labels: &NO_LABELS,
            maintenance: Maintenance::Open,
        }
    }

    fn installed(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(m, v)| (m.to_string(), v.to_string()))
            .collect()
    }

    fn ready(name: &str) -> ModuleReport {
        report(name, State::Ready, "")
    }

    fn ran(state: State, message: &str, objects: usize) -> Ran {
        Ran {
            state,
            message: Some(message.into()),
            objects,
        }
    }

    fn deps(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(n, d)| (n.to_string(), d.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn a_module_runs_the_version_its_channel_offers() {
        let catalog = Catalog::default().offer("dash", "regular", v("1.0.0"));
        let specs = [spec("dash")];
        let plan = plan(&catalog, &request(&specs), &installed(&[]));
        let run = &plan.run["dash"];
        assert_eq!(
            (run.channel.as_str(), run.candidate.version, &run.held),
            ("regular", "1.0.0", &None)
        );
        assert!(plan.reports.is_empty() && plan.notices.is_empty());
    }

    #[test]
    fn a_pinned_version_runs_and_the_channels_is_shown_next_to_it() {
        let catalog = Catalog::default()
            .offer("dash", "regular", v("1.1.0"))
            .keeps("dash", "1.0.0");
        let mut dash = spec("dash");
        dash.version = Some("1.0.0".into());
        let specs = [dash];
        let plan = plan(&catalog, &request(&specs), &installed(&[("dash", "1.0.0")]));
        let run = &plan.run["dash"];
        assert_eq!(run.candidate.version, "1.0.0");
        assert!(run.pinned);
        assert_eq!(run.channel_version.as_deref(), Some("1.1.0"));
        assert!(plan.notices.is_empty());
    }

    #[test]
    fn a_pinned_version_the_plugin_does_not_list_is_an_error_naming_the_field() {
        let catalog = Catalog::default().offer("dash", "regular", v("1.1.0"));
        let mut dash = spec("dash");
        dash.version = Some("9.9.9".into());
        let specs = [dash];
        let plan = plan(&catalog, &request(&specs), &installed(&[]));
        assert!(plan.run.is_empty());
        let message = plan.reports["dash"].message.clone().unwrap();
        assert_eq!(plan.reports["dash"].state, State::Error);
        assert!(
            message.contains("9.9.9") && message.contains("modules[].version"),
            "{message}"
        );
    }

    #[test]
    fn a_pin_below_the_installed_version_is_held_unless_the_set_allows_it() {
        let catalog = Catalog::default()
            .keeps("dash", "1.0.0")
            .keeps("dash", "2.0.0");
        let mut dash = spec("dash");
        dash.version = Some("1.0.0".into());
        let specs = [dash];
        let was = installed(&[("dash", "2.0.0")]);
        let plan_held = plan(&catalog, &request(&specs), &was);
        let run = &plan_held.run["dash"];
        assert_eq!(run.candidate.version, "2.0.0");
        let held = run.held.as_deref().unwrap();
        assert!(held.contains("pinned version 1.0.0"), "{held}");
        let mut allowed = request(&specs);
        allowed.allow_downgrade = true;
        assert_eq!(
            plan(&catalog, &allowed, &was).run["dash"].candidate.version,
            "1.0.0"
        );
    }

    #[test]
    fn a_restricted_module_is_offered_only_to_matching_sets() {
        let mut offer = v("1.0.0");
        offer.selector =
            Some(serde_json::from_value(json!({"matchLabels": {"tier": "premium"}})).unwrap());
        let catalog = Catalog::default().offer("dash", "regular", offer);
        let specs = [spec("dash")];
        let refused = plan(&catalog, &request(&specs), &installed(&[]));
        let message = refused.reports["dash"].message.clone().unwrap();
        assert_eq!(refused.reports["dash"].state, State::Error);
        assert!(
            message.contains("tier=premium") && message.contains("spec.moduleSetSelector"),
            "{message}"
        );
        let premium = BTreeMap::from([("tier".to_string(), "premium".to_string())]);
        let mut matching = request(&specs);
        matching.labels = &premium;
        assert!(
            plan(&catalog, &matching, &installed(&[]))
                .run
                .contains_key("dash")
        );
    }

    #[test]
    fn mandatory_modules_join_matching_sets_and_override_their_entry() {
        let guard: Mandatory = serde_json::from_value(
            json!({"version": "2.0.0", "moduleSetSelector": {"matchLabels": {"guarded": "yes"}}}),
        )
        .unwrap();
        let everywhere: Mandatory = serde_json::from_value(json!({"version": "1.0.0"})).unwrap();
        let all = [
            ("guard".to_string(), guard),
            ("agent".to_string(), everywhere),
        ];
        let mut listed = spec("guard");
        listed.managed = Some(false);
        listed.config = Some(json!({"k": "v"}));
        let own = [spec("dash"), listed];
        let guarded = BTreeMap::from([("guarded".to_string(), "yes".to_string())]);
        let (modules, names) = with_mandatory(&own, &all, &guarded);
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["agent", "guard"]);
        let guard = modules.iter().find(|m| m.name == "guard").unwrap();
        assert_eq!(
            (guard.version.as_deref(), guard.managed),
            (Some("2.0.0"), None)
        );
        assert_eq!(guard.config, Some(json!({"k": "v"})));
        assert!(
            modules
                .iter()
                .any(|m| m.name == "agent" && m.version.as_deref() == Some("1.0.0"))
        );
        let (modules, names) = with_mandatory(&own[..1], &all, &NO_LABELS);
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["agent"]);
        assert_eq!(modules.len(), 2);
    }

    #[test]
    fn a_downtime_upgrade_waits_for_the_window_a_first_install_does_not() {
        let mut next = v("2.0.0");
        next.downtime = true;
        let catalog = Catalog::default()
            .offer("dash", "regular", next)
            .keeps("dash", "1.0.0");
        let specs = [spec("dash")];
        let opens: jiff::Timestamp = "2026-11-25T02:00:00Z".parse().unwrap();
        let mut closed = request(&specs);
        closed.maintenance = Maintenance::Closed { opens };
        let was = installed(&[("dash", "1.0.0")]);
        let plan_closed = plan(&catalog, &closed, &was);
        let run = &plan_closed.run["dash"];
        assert_eq!(run.candidate.version, "1.0.0");
        assert!(
            run.pending
                .as_deref()
                .unwrap()
                .contains("2026-11-25T02:00:00Z")
        );
        assert_eq!(run.channel_version.as_deref(), Some("2.0.0"));
        assert_eq!(
            plan(&catalog, &closed, &installed(&[])).run["dash"]
                .candidate
                .version,
            "2.0.0"
        );
        assert_eq!(
            plan(&catalog, &request(&specs), &was).run["dash"]
                .candidate
                .version,
            "2.0.0"
        );
    }

    #[test]
    fn a_module_takes_its_own_channel_over_the_sets() {
        let mut dash = spec("dash");
        dash.channel = Some("fast".into());
        assert_eq!(channel_of(&dash, Some("stable")), "fast");
    }

    #[test]
    fn a_module_without_a_channel_takes_the_sets_and_else_regular() {
        assert_eq!(channel_of(&spec("dash"), Some("stable")), "stable");
        assert_eq!(channel_of(&spec("dash"), None), DEFAULT_CHANNEL);
    }

    #[test]
    fn an_unmanaged_module_is_unmanaged_and_forgotten_without_running() {
        let mut dash = spec("dash");
        dash.managed = Some(false);
        let specs = [dash];
        let plan = plan(&Catalog::default(), &request(&specs), &installed(&[]));
        assert!(plan.run.is_empty());
        assert_eq!(plan.unmanaged, ["dash"]);
        assert_eq!(plan.reports["dash"].state, State::Unmanaged);
    }

    #[test]
    fn a_module_the_catalog_cannot_resolve_reports_error_and_does_not_run() {
        let specs = [spec("dash")];
        let plan = plan(&Catalog::default(), &request(&specs), &installed(&[]));
        assert!(plan.run.is_empty());
        let dash = &plan.reports["dash"];
        assert_eq!(dash.state, State::Error);
        assert_eq!(
            dash.message.as_deref(),
            Some("no Plugin dash on channel regular")
        );
    }

    #[test]
    fn a_higher_offer_than_the_installed_version_runs() {
        let catalog = Catalog::default().offer("dash", "regular", v("1.1.0"));
        let specs = [spec("dash")];
        let plan = plan(&catalog, &request(&specs), &installed(&[("dash", "1.0.0")]));
        assert_eq!(plan.run["dash"].candidate.version, "1.1.0");
        assert!(plan.notices.is_empty());
    }

    #[test]
    fn a_lower_offer_keeps_the_installed_version_with_a_warning_and_a_notice() {
        let catalog = Catalog::default()
            .offer("dash", "regular", v("1.0.0"))
            .keeps("dash", "1.1.0");
        let specs = [spec("dash")];
        let plan = plan(&catalog, &request(&specs), &installed(&[("dash", "1.1.0")]));
        let run = &plan.run["dash"];
        assert_eq!(run.candidate.version, "1.1.0");
        assert_eq!(
            run.held.as_deref(),
            Some("channel regular offers 1.0.0, lower than the installed 1.1.0: kept 1.1.0")
        );
        assert_eq!(
            plan.notices,
            [Notice::DowngradeRefused {
                module: "dash".into(),
                offered: "1.0.0".into(),
                installed: "1.1.0".into(),
            }]
        );
    }

    #[test]
    fn a_lower_offer_whose_installed_version_is_gone_reports_warning_without_running() {
        let catalog = Catalog::default().offer("dash", "regular", v("1.0.0"));
        let specs = [spec("dash")];
        let plan = plan(&catalog, &request(&specs), &installed(&[("dash", "1.1.0")]));
        assert!(plan.run.is_empty());
        let dash = &plan.reports["dash"];
        assert_eq!(dash.state, State::Warning);
        assert_eq!(dash.version.as_deref(), Some("1.1.0"));
        assert_eq!(dash.channel.as_deref(), Some("regular"));
        assert_eq!(plan.notices.len(), 1);
    }

    #[test]
    fn a_channel_that_allows_downgrades_runs_the_lower_version() {
        let mut lower = v("1.0.0");
        lower.allows_downgrade = true;
        assert_eq!(
            refused_downgrade(Some(&"1.1.0".to_string()), &lower, false),
            None
        );
    }

    #[test]
    fn a_set_that_allows_downgrades_runs_the_lower_version() {
        assert_eq!(
            refused_downgrade(Some(&"1.1.0".to_string()), &v("1.0.0"), true),
            None
        );
    }

    #[test]
    fn the_same_version_is_no_downgrade() {
        assert_eq!(
            refused_downgrade(Some(&"1.0.0".to_string()), &v("1.0.0"), false),
            None
        );
    }

    #[test]
    fn a_first_install_is_no_downgrade() {
        assert_eq!(refused_downgrade(None, &v("0.1.0"), false), None);
    }

    #[test]
    fn versions_compare_as_semver() {
        assert!(newer("1.10.0", "1.9.0"));
        assert!(!newer("1.0.0", "1.0.0"));
        assert!(!newer("x", "1.0.0"));
    }

    #[test]
    fn the_sets_config_is_merged_over_the_plugins_defaults() {
        let mut offer = v("1.0.0");
        offer.defaults = Some(json!({"a": 1, "b": 2}));
        let catalog = Catalog::default().offer("dash", "regular", offer);
        let mut dash = spec("dash");
        dash.config = Some(json!({"b": 3}));
        dash.adopt = Some(true);
        let specs = [dash];
        let plan = plan(&catalog, &request(&specs), &installed(&[]));
        let run = &plan.run["dash"];
        assert_eq!(run.config, json!({"a": 1, "b": 3}).to_string());
        assert!(run.adopt);
    }

    #[test]
    fn a_config_replacing_a_locked_key_reports_error_and_does_not_run() {
        let mut offer = v("1.0.0");
        offer.defaults = Some(json!({"manifest": "x"}));
        offer.locked = vec!["manifest".into()];
        let catalog = Catalog::default().offer("dash", "regular", offer);
        let mut dash = spec("dash");
        dash.config = Some(json!({"manifest": "y"}));
        let specs = [dash];
        let plan = plan(&catalog, &request(&specs), &installed(&[]));
        assert!(plan.run.is_empty());
        assert_eq!(plan.reports["dash"].state, State::Error);
    }

    #[test]
    fn a_set_being_deleted_plans_no_module() {
        let catalog = Catalog::default().offer("dash", "regular", v("1.0.0"));
        let specs = [spec("dash")];
        let mut req = request(&specs);
        req.deleting = true;
        let plan = plan(&catalog, &req, &installed(&[]));
        assert!(plan.run.is_empty() && plan.reports.is_empty());
    }

    #[test]
    fn a_dependency_outside_the_set_refuses_the_module() {
        let in_set = HashSet::from(["a"]);
        let gate = gate(
            "a",
            &["b".into()],
            &in_set,
            &HashSet::new(),
            &BTreeMap::new(),
        );
        assert_eq!(
            gate,
            Gate::Refused("requires module b, which is not in the ModuleSet".into())
        );
    }

    #[test]
    fn a_module_in_a_dependency_cycle_is_refused() {
        let in_set = HashSet::from(["a", "b"]);
        let cyclic = HashSet::from(["a".to_string(), "b".to_string()]);
        let gate = gate("a", &["b".into()], &in_set, &cyclic, &BTreeMap::new());
        assert_eq!(gate, Gate::Refused("dependency cycle: a requires b".into()));
    }

    #[test]
    fn a_module_waits_for_dependencies_that_are_not_ready() {
        let in_set = HashSet::from(["a", "b", "c"]);
        let mut reports = BTreeMap::from([("b".to_string(), ready("b"))]);
        reports.insert("c".into(), report("c", State::Processing, ""));
        let deps = ["b".to_string(), "c".to_string()];
        let gate = gate("a", &deps, &in_set, &HashSet::new(), &reports);
        assert_eq!(gate, Gate::Waiting("waiting for c to be Ready".into()));
    }

    #[test]
    fn a_module_whose_dependencies_are_ready_runs() {
        let in_set = HashSet::from(["a", "b"]);
        let reports = BTreeMap::from([("b".to_string(), ready("b"))]);
        let gate = gate("a", &["b".into()], &in_set, &HashSet::new(), &reports);
        assert_eq!(gate, Gate::Open);
    }

    #[test]
    fn a_held_version_turns_ready_into_warning_with_its_reason() {
        let (ran, _) = settle(
            "a",
            "1.1.0",
            Some("kept"),
            None,
            ran(State::Ready, "", 3),
            3,
        );
        assert_eq!(
            (ran.state, ran.message.as_deref()),
            (State::Warning, Some("kept"))
        );
    }

    #[test]
    fn a_held_version_leaves_an_error_an_error() {
        let (ran, _) = settle(
            "a",
            "1.1.0",
            Some("kept"),
            None,
            ran(State::Error, "boom", 0),
            0,
        );
        assert_eq!(
            (ran.state, ran.message.as_deref()),
            (State::Error, Some("boom"))
        );
    }

    #[test]
    fn a_new_version_that_did_not_fail_is_announced_as_an_upgrade() {
        let (_, notice) = settle(
            "a",
            "1.1.0",
            None,
            Some("1.0.0"),
            ran(State::Processing, "", 1),
            1,
        );
        assert_eq!(
            notice,
            Some(Notice::Upgraded {
                module: "a".into(),
                from: "1.0.0".into(),
                to: "1.1.0".into(),
            })
        );
    }

    #[test]
    fn a_new_version_that_failed_is_not_announced() {
        let (_, notice) = settle(
            "a",
            "1.1.0",
            None,
            Some("1.0.0"),
            ran(State::Error, "", 0),
            2,
        );
        assert_eq!(notice, None);
    }

    #[test]
    fn a_first_install_and_an_unchanged_version_are_not_announced() {
        let first = settle("a", "1.0.0", None, None, ran(State::Ready, "", 1), 1).1;
        let same = settle(
            "a",
            "1.0.0",
            None,
            Some("1.0.0"),
            ran(State::Ready, "", 1),
            1,
        )
        .1;
        assert_eq!((first, same), (None, None));
    }

    #[test]
    fn a_failed_pass_reports_what_the_inventory_lists() {
        let (ran, _) = settle("a", "1.0.0", None, None, ran(State::Error, "", 7), 2);
        assert_eq!(ran.objects, 2);
    }

    #[test]
    fn a_passing_module_reports_what_it_applied() {
        let (ran, _) = settle("a", "1.0.0", None, None, ran(State::Ready, "", 7), 2);
        assert_eq!(ran.objects, 7);
    }

    #[test]
    fn modules_dropped_from_the_spec_leave_and_the_others_stay() {
        let specs = [spec("a"), spec("c")];
        let installed = ["a".to_string(), "b".to_string(), "c".to_string()];
        assert_eq!(dropped(&installed, &request(&specs)), ["b"]);
    }

    #[test]
    fn every_installed_module_leaves_a_set_being_deleted() {
        let specs = [spec("a")];
        let mut req = request(&specs);
        req.deleting = true;
        let installed = ["a".to_string(), "b".to_string()];
        assert_eq!(dropped(&installed, &req), ["a", "b"]);
    }

    #[test]
    fn a_leaving_module_another_leaving_module_requires_waits_for_it() {
        let leaving = deps(&[("a", &["b"]), ("b", &[])]);
        assert_eq!(needed_by("b", &leaving, &BTreeMap::new()), Some("a"));
        assert_eq!(needed_by("a", &leaving, &BTreeMap::new()), None);
    }

    #[test]
    fn a_leaving_module_a_staying_module_requires_waits_for_it() {
        let leaving = deps(&[("b", &[])]);
        let staying = deps(&[("a", &["b"])]);
        assert_eq!(needed_by("b", &leaving, &staying), Some("a"));
    }

    #[test]
    fn a_module_requiring_itself_does_not_wait_for_itself() {
        let leaving = deps(&[("a", &["a"])]);
        assert_eq!(needed_by("a", &leaving, &BTreeMap::new()), None);
    }

    #[test]
    fn a_module_waiting_for_a_dependent_says_which_and_stays_deleting() {
        let r = waiting_for_dependent("b", "1.0.0", "a");
        assert_eq!(r.state, State::Deleting);
        assert_eq!(r.version.as_deref(), Some("1.0.0"));
        assert_eq!(
            r.message.as_deref(),
            Some("waiting for a to be removed first")
        );
    }

    #[test]
    fn a_removal_answering_ready_is_gone() {
        assert_eq!(
            removal("a", "1.0.0", ran(State::Ready, "", 0), None),
            Removal::Gone
        );
    }

    #[test]
    fn a_removal_in_progress_is_deleting_and_looks_again_when_the_plugin_asked() {
        let Removal::Pending(r, after) = removal(
            "a",
            "1.0.0",
            ran(State::Processing, "draining", 4),
            Some(Duration::from_secs(1)),
        ) else {
            panic!("a module with objects left is not gone");
        };
        assert_eq!((r.state, r.objects), (State::Deleting, 4));
        assert_eq!(r.version.as_deref(), Some("1.0.0"));
        assert_eq!(after, Duration::from_secs(1));
    }

    #[test]
    fn a_removal_in_progress_without_a_requeue_looks_again_in_five_seconds() {
        let pending = removal("a", "1.0.0", ran(State::Deleting, "", 1), None);
        assert!(matches!(pending, Removal::Pending(_, after) if after == REMOVAL_REQUEUE));
    }

    #[test]
    fn a_failed_removal_stays_error() {
        let pending = removal("a", "1.0.0", ran(State::Error, "refused", 1), None);
        assert!(matches!(pending, Removal::Pending(r, _) if r.state == State::Error));
    }

    #[test]
    fn status_lists_the_sets_order_then_modules_being_removed() {
        let specs = [spec("z"), spec("a")];
        let reports: BTreeMap<String, ModuleReport> = ["a", "old", "z"]
            .into_iter()
            .map(|n| (n.to_string(), ready(n)))
            .collect();
        let names: Vec<String> = in_status_order(&specs, reports)
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["z", "a", "old"]);
    }

    fn moved(plugin: &str, channels: &[&str]) -> CatalogWake {
        use crate::plugins::{CatalogChange, ChangedChannels};
        CatalogWake::Changed(CatalogChange {
            plugin: plugin.into(),
            channels: ChangedChannels::Some(channels.iter().map(|c| c.to_string()).collect()),
        })
    }

    #[test]
    fn a_moved_channel_wakes_sets_with_a_module_on_it() {
        let mut fast = spec("dash");
        fast.channel = Some("fast".into());
        let wake = moved("dash", &["fast"]);
        assert!(woken_by(&[fast], None, &[], &wake));
        assert!(woken_by(&[spec("dash")], Some("fast"), &[], &wake));
        assert!(!woken_by(&[spec("dash")], None, &[], &wake));
        assert!(woken_by(
            &[spec("dash")],
            None,
            &[],
            &moved("dash", &["regular"])
        ));
    }

    #[test]
    fn another_plugin_wakes_nobody_and_a_lag_or_a_whole_plugin_wakes_its_users() {
        let set = [spec("dash"), spec("logs")];
        assert!(!woken_by(&set, None, &[], &moved("other", &["regular"])));
        assert!(woken_by(&set, None, &[], &CatalogWake::Lagged));
        let appeared = CatalogWake::Changed(crate::plugins::CatalogChange {
            plugin: "logs".into(),
            channels: crate::plugins::ChangedChannels::All,
        });
        assert!(woken_by(&set, Some("fast"), &[], &appeared));
        assert!(!woken_by(&[], None, &[], &CatalogWake::Lagged));
    }

    #[test]
    fn a_module_that_left_but_is_still_reported_is_woken_on_any_channel() {
        let leaving = report("old", State::Deleting, String::new());
        let wake = moved("old", &["fast"]);
        assert!(woken_by(
            &[spec("dash")],
            None,
            std::slice::from_ref(&leaving),
            &wake
        ));
        assert!(!woken_by(
            &[spec("dash")],
            None,
            &[leaving],
            &moved("gone", &["fast"])
        ));
    }
}
