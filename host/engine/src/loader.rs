//! Loading many components at once, as a registry does: `*.wasm` files read
//! from a directory, compiled a few at a time within a byte budget (or, for
//! components the snapshot knows, listed at once and compiled in the
//! background within the same bounds). Tools come out as `dyn Tool`, so a
//! caller needs to know nothing else about them; what is wasm about them
//! (the `wasi:http` imports a grant must cover) comes out as data.

use crate::wasm_tool::{Confirmed, WasmTool};
use crate::{Engine, Snapshot};
use airlock_core::config::Limits;
use airlock_core::descriptor::Descriptor;
use airlock_core::error::LoadError;
use airlock_core::grants::ToolGrants;
use airlock_core::host_files::{self, Links};
use airlock_core::tool::{Tool, ToolOrigin};
use bytes::Bytes;
use futures::FutureExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Semaphore;

/// The most component bytes loaded at once, in MiB (at least one
/// component of the largest size allowed).
const LOAD_BUDGET_MIB: u64 = 128;

/// A component's bytes, or why they could not be read.
pub type ComponentBytes = Result<Bytes, LoadError>;

/// Background compiles, finished when every one is.
pub type Compiling = futures::future::Shared<futures::future::BoxFuture<'static, ()>>;

/// A component loaded as a tool.
pub struct LoadedTool {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Its imports that need a network grant (see [`ungranted_network`]).
    pub network_imports: Vec<String>,
    /// Set when it was listed from the snapshot and may not be compiled
    /// yet.
    pub pending: Option<Pending>,
}

impl LoadedTool {
    pub(crate) fn of(tool: WasmTool) -> LoadedTool {
        let network_imports = tool.network_imports().map(String::from).collect();
        let tool = Arc::new(tool);
        let pending = tool
            .is_listed_from_snapshot()
            .then(|| Pending(tool.clone()));
        LoadedTool {
            tool,
            network_imports,
            pending,
        }
    }
}

/// A tool listed from the snapshot: described, not yet known to describe
/// itself so.
#[derive(Clone)]
pub struct Pending(Arc<WasmTool>);

impl Pending {
    /// The tool as it was listed.
    pub fn tool(&self) -> &dyn Tool {
        self.0.as_ref()
    }

    /// Whether its compile has finished and it described itself as listed.
    pub fn is_ready(&self) -> bool {
        self.0.is_ready()
    }

    /// Waits for its compile (starting it if nothing has), and says how it
    /// turned out.
    pub async fn settle(&self) -> Settled {
        match self.0.settle().await {
            Confirmed::AsListed => Settled::AsListed,
            Confirmed::Differs(tool) => Settled::Differs(LoadedTool::of(*tool)),
            Confirmed::Failed(error) => Settled::Failed(error),
        }
    }
}

/// What compiling a tool listed from the snapshot showed
/// ([`Pending::settle`]).
pub enum Settled {
    /// It describes itself as it was listed.
    AsListed,
    /// It describes itself otherwise: the tool to list instead, loaded.
    Differs(LoadedTool),
    /// It failed to load, and why.
    Failed(LoadError),
}

/// What loads run under: a few at a time, and the bytes of the components
/// loading at once within a budget (a compile's memory grows with its
/// component, and hundreds of cold loads at once would peak far above any
/// one call's limits). Background compiles share them.
#[derive(Clone)]
pub struct LoadBounds {
    parallel: Arc<Semaphore>,
    budget: Arc<Semaphore>,
    budget_mib: u64,
}

impl LoadBounds {
    fn new(engine: &Engine) -> LoadBounds {
        let budget_mib = LOAD_BUDGET_MIB.max(engine.limits().component_bytes.div_ceil(1 << 20));
        LoadBounds {
            parallel: Arc::new(Semaphore::new(
                std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 8)),
            )),
            budget: Arc::new(Semaphore::new(budget_mib as usize)),
            budget_mib,
        }
    }

    /// The budget a component of `bytes` takes, in MiB.
    fn room(&self, bytes: &[u8]) -> u32 {
        (bytes.len() as u64)
            .div_ceil(1 << 20)
            .clamp(1, self.budget_mib) as u32
    }

    /// Compiles the `pending` tools and the `unlisted` components in the
    /// background, within these bounds, the smallest components first
    /// (most tools are ready soonest, and a call that arrives before its
    /// tool's turn starts that compile itself); `None` when there are none.
    /// An unlisted component's compile leaves its tool (or its failure) in
    /// the artifact cache, where the next load lists it.
    pub fn compile_in_background(
        &self,
        engine: &Engine,
        pending: Vec<Pending>,
        unlisted: Vec<Unlisted>,
    ) -> Option<Compiling> {
        let mut work: Vec<Work> = pending
            .into_iter()
            .map(|Pending(tool)| Work::Settle(tool))
            .chain(unlisted.into_iter().map(Work::Compile))
            .collect();
        if work.is_empty() {
            return None;
        }
        work.sort_by_key(|work| work.bytes().len());
        let (bounds, engine) = (self.clone(), engine.clone());
        let all = tokio::spawn(async move {
            let mut tasks = tokio::task::JoinSet::new();
            for work in work {
                // Turns are taken here, in order, so the order holds.
                let Ok(turn) = bounds.parallel.clone().acquire_owned().await else {
                    break;
                };
                let Ok(room) = bounds
                    .budget
                    .clone()
                    .acquire_many_owned(bounds.room(work.bytes()))
                    .await
                else {
                    break;
                };
                let engine = engine.clone();
                tasks.spawn(async move {
                    let _held = (turn, room);
                    match work {
                        Work::Settle(tool) => {
                            let _ = tool.settle().await;
                        }
                        Work::Compile(Unlisted { origin, bytes }) => {
                            if let Err(error) = WasmTool::load(&engine, bytes, origin.clone()).await
                            {
                                tracing::warn!(%origin, "its component could not be loaded: {error}");
                            }
                        }
                    }
                });
            }
            while let Some(joined) = tasks.join_next().await {
                if let Err(e) = joined {
                    tracing::error!("a background compile failed: {e}");
                }
            }
        });
        let done = async move {
            let _ = all.await;
        };
        Some(done.boxed().shared())
    }
}

/// A component neither the artifact cache nor the snapshot knows, left out
/// of a listing ([`Engine::load_all`] with a snapshot) and compiled in the
/// background ([`LoadBounds::compile_in_background`]).
pub struct Unlisted {
    origin: ToolOrigin,
    bytes: Bytes,
}

impl Unlisted {
    /// Where the component comes from.
    pub fn origin(&self) -> &ToolOrigin {
        &self.origin
    }
}

/// One background compile.
enum Work {
    /// A tool listed from the snapshot.
    Settle(Arc<WasmTool>),
    /// A component not listed yet.
    Compile(Unlisted),
}

impl Work {
    fn bytes(&self) -> &[u8] {
        match self {
            Work::Settle(tool) => tool.bytes(),
            Work::Compile(unlisted) => &unlisted.bytes,
        }
    }
}

/// What [`Engine::load_all`] gave.
pub struct Loading {
    /// Each source's tool, or why it failed, in the sources' order; the
    /// unlisted components are not among them.
    pub results: Vec<(ToolOrigin, Result<LoadedTool, LoadError>)>,
    /// With a snapshot, the components neither it nor the artifact cache
    /// knows: not compiled yet, so not listed.
    pub unlisted: Vec<Unlisted>,
    /// The bounds, for the background compiles.
    pub bounds: LoadBounds,
}

impl Engine {
    /// Loads `sources` as tools, in their order, within [`LoadBounds`]. With
    /// a `snapshot`, nothing is compiled: a component it knows is listed
    /// from it and left to compile later (see [`Pending`]), and one that
    /// neither it nor the artifact cache knows is left unlisted (see
    /// [`Loading::unlisted`]).
    pub async fn load_all(
        &self,
        sources: Vec<(ToolOrigin, ComponentBytes)>,
        snapshot: Option<Arc<Snapshot>>,
    ) -> Loading {
        enum Outcome {
            Listed(Result<LoadedTool, LoadError>),
            Unlisted(Bytes),
        }
        let bounds = LoadBounds::new(self);
        let mut tasks = tokio::task::JoinSet::new();
        for (i, (origin, bytes)) in sources.into_iter().enumerate() {
            let engine = self.clone();
            let bounds = bounds.clone();
            let snapshot = snapshot.clone();
            tasks.spawn(async move {
                let bytes = match bytes {
                    Ok(bytes) => bytes,
                    Err(e) => return (i, origin, Outcome::Listed(Err(e))),
                };
                let _turn = bounds.parallel.clone().acquire_owned().await;
                let _room = bounds
                    .budget
                    .clone()
                    .acquire_many_owned(bounds.room(&bytes))
                    .await;
                let listed = match &snapshot {
                    Some(s) => WasmTool::list_from(&engine, bytes.clone(), origin.clone(), s).await,
                    None => WasmTool::load(&engine, bytes.clone(), origin.clone())
                        .await
                        .map(Some),
                };
                let outcome = match listed {
                    Ok(Some(tool)) => Outcome::Listed(Ok(LoadedTool::of(tool))),
                    Ok(None) => Outcome::Unlisted(bytes),
                    Err(error) => Outcome::Listed(Err(error)),
                };
                (i, origin, outcome)
            });
        }
        let mut outcomes = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(outcome) => outcomes.push(outcome),
                Err(e) => tracing::error!("a tool loader task failed: {e}"),
            }
        }
        outcomes.sort_by_key(|(i, _, _)| *i);
        let mut results = Vec::new();
        let mut unlisted = Vec::new();
        for (_, origin, outcome) in outcomes {
            match outcome {
                Outcome::Listed(result) => results.push((origin, result)),
                Outcome::Unlisted(bytes) => unlisted.push(Unlisted { origin, bytes }),
            }
        }
        Loading {
            results,
            unlisted,
            bounds,
        }
    }
}

/// How much one tool directory may load: its first `components` files by
/// name, and of those, as many (each whole) as fit in `bytes`.
#[derive(Clone, Copy, Debug)]
pub struct DirBounds {
    /// The largest component file read.
    pub file_bytes: u64,
    /// The most component files read.
    pub components: usize,
    /// The most bytes read in all.
    pub bytes: u64,
}

impl DirBounds {
    /// The bounds `limits` sets.
    pub fn of(limits: &Limits) -> DirBounds {
        DirBounds {
            file_bytes: limits.component_bytes,
            components: limits.tool_dir_components,
            bytes: limits.tool_dir_bytes,
        }
    }
}

/// A tool directory's components, as far as its bounds let them be read.
#[derive(Debug)]
pub struct DirSources {
    /// Each file read, in name order, with its bytes or why it could not be.
    pub files: Vec<(ToolOrigin, ComponentBytes)>,
    /// Why the files past `files` were not read, once for the directory.
    pub past_bounds: Option<LoadError>,
}

/// The components of a tool directory: each `*.wasm` file in `dir`,
/// sorted by name, each read up to `bounds.file_bytes`, and no more of
/// them (nor more bytes, counted by their size on disk and again as read)
/// than `bounds` allows: a directory of thousands of large files reads
/// none past its bounds. The files are read on as many threads as there
/// are cores: at every start, and a directory of stock Python and
/// JavaScript tools holds tens of megabytes.
pub fn component_sources(dir: &Path, bounds: DirBounds) -> Result<DirSources, LoadError> {
    let all = component_files(dir)?;
    let mut total = 0u64;
    let within = all
        .iter()
        .take(bounds.components)
        .take_while(|file| {
            let size = std::fs::metadata(file).map_or(0, |m| m.len().min(bounds.file_bytes));
            total = total.saturating_add(size);
            total <= bounds.bytes
        })
        .count();
    let mut files = read_components(&all[..within], bounds.file_bytes);
    // A file that grew since its size was taken counts as read.
    let mut total = 0u64;
    let read = files
        .iter()
        .take_while(|(_, bytes)| {
            total = total.saturating_add(bytes.as_ref().map_or(0, |b| b.len() as u64));
            total <= bounds.bytes
        })
        .count();
    files.truncate(read);
    let past_bounds = all.get(read).map(|first| {
        let (bound, limit) = if read == bounds.components {
            (
                format!("{} components", bounds.components),
                "limits.tool_dir_components",
            )
        } else {
            (format!("{} bytes", bounds.bytes), "limits.tool_dir_bytes")
        };
        LoadError::DirectoryFull {
            found: all.len(),
            skipped: all.len() - read,
            first: first
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            bound,
            limit: limit.into(),
        }
    });
    Ok(DirSources { files, past_bounds })
}

/// Reads `files`, each up to `limit` bytes, on as many threads as there
/// are cores, keeping their order.
fn read_components(files: &[PathBuf], limit: u64) -> Vec<(ToolOrigin, ComponentBytes)> {
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    let mut read: Vec<Option<ComponentBytes>> = files.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(file) = files.get(i) else {
                            return mine;
                        };
                        mine.push((i, read_component(file, limit)));
                    }
                })
            })
            .collect();
        for (i, bytes) in readers
            .into_iter()
            .flat_map(|reader| reader.join().unwrap_or_default())
        {
            read[i] = Some(bytes);
        }
    });
    files
        .iter()
        .zip(read)
        .map(|(file, bytes)| {
            let bytes = bytes.unwrap_or_else(|| {
                Err(LoadError::Io(format!(
                    "{}: its reader failed",
                    file.display()
                )))
            });
            (ToolOrigin::File(file.clone()), bytes)
        })
        .collect()
}

/// The component files of a tool directory: the `*.wasm` files in `dir`,
/// sorted by name.
pub fn component_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        LoadError::Io(format!(
            "cannot list the tool directory {}: {e}",
            dir.display()
        ))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && !p.is_dir())
        .collect();
    files.sort();
    Ok(files)
}

/// Reads a component file: a regular file (a link the operator put in a
/// tool directory is followed), refused once more than `limit` bytes have
/// been read, whatever its metadata says.
fn read_component(path: &Path, limit: u64) -> ComponentBytes {
    host_files::read_capped(path, limit, Links::Follow)
        .map(Bytes::from)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::FileTooLarge => LoadError::TooLarge { limit },
            _ => LoadError::Io(format!("{}: {e}", path.display())),
        })
}

/// The error for a tool that imports `wasi:http` (`network_imports`) and
/// asks for network hosts the operator grants it none of; `None` when it
/// imports none, could be granted one, or asks for no hosts: such a tool
/// loads with `wasi:http` linked deny-all (stock JavaScript components
/// import it whether they use it or not), and every request it makes is
/// refused at use.
pub fn ungranted_network(
    d: &Descriptor,
    network_imports: &[String],
    grants: &ToolGrants,
) -> Option<LoadError> {
    let import = network_imports.first()?;
    if !d.wants_network() || grants.network_possible(d) {
        return None;
    }
    let how = format!(
        "grant hosts with `--allow-host HOST`, or `network = [...]` under [tools.{}] in airlock.toml",
        d.name
    );
    Some(LoadError::UngrantedImport {
        import: import.clone(),
        needs: "a network grant".into(),
        how,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_component_file_gets_its_own_bytes_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut expected = Vec::new();
        for i in 0..40 {
            let file = dir.path().join(format!("tool{i:02}.wasm"));
            let bytes = format!("component {i} ").repeat(1 + i * 100).into_bytes();
            std::fs::write(&file, &bytes).unwrap();
            expected.push((file, Some(bytes)));
        }
        let large = dir.path().join("tool40.wasm");
        std::fs::write(&large, vec![0u8; 70_000]).unwrap();
        expected.push((large, None));
        std::fs::write(dir.path().join("notes.txt"), "not a component").unwrap();

        let bounds = DirBounds {
            file_bytes: 64_000,
            components: 100,
            bytes: u64::MAX,
        };
        let sources = component_sources(dir.path(), bounds).unwrap();
        assert!(sources.past_bounds.is_none());
        let sources = sources.files;
        assert_eq!(sources.len(), expected.len());
        for ((origin, bytes), (file, want)) in sources.into_iter().zip(expected) {
            assert_eq!(origin, ToolOrigin::File(file.clone()));
            match (bytes, want) {
                (Ok(bytes), Some(want)) => assert!(bytes == want, "{} read wrong", file.display()),
                (Err(LoadError::TooLarge { limit: 64_000 }), None) => {}
                (got, _) => panic!("{}: {got:?}", file.display()),
            }
        }
    }

    fn directory_of(sizes: &[usize]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (i, size) in sizes.iter().enumerate() {
            std::fs::write(dir.path().join(format!("t{i:02}.wasm")), vec![b'x'; *size]).unwrap();
        }
        dir
    }

    fn names(sources: &DirSources) -> Vec<String> {
        sources
            .files
            .iter()
            .map(|(origin, _)| match origin {
                ToolOrigin::File(f) => f.file_name().unwrap().to_string_lossy().into_owned(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_directory_past_its_count_reads_the_first_files_by_name_and_says_so_once() {
        let dir = directory_of(&[10; 5]);
        let bounds = DirBounds {
            file_bytes: 100,
            components: 3,
            bytes: u64::MAX,
        };
        let sources = component_sources(dir.path(), bounds).unwrap();
        assert_eq!(names(&sources), ["t00.wasm", "t01.wasm", "t02.wasm"]);
        let error = sources.past_bounds.expect("the bound is reported");
        assert_eq!(
            error.to_string(),
            "holds 5 components; 2 of them, from t03.wasm on (by name), were not loaded: more \
             than 3 components (limits.tool_dir_components); move tools to another directory, \
             or raise the limit"
        );
    }

    #[test]
    fn a_directory_past_its_bytes_reads_only_whole_files_within_them() {
        let dir = directory_of(&[40, 40, 40, 5]);
        let bounds = DirBounds {
            file_bytes: 100,
            components: 100,
            bytes: 100,
        };
        let sources = component_sources(dir.path(), bounds).unwrap();
        assert_eq!(names(&sources), ["t00.wasm", "t01.wasm"]);
        assert!(matches!(
            sources.past_bounds,
            Some(LoadError::DirectoryFull { skipped: 2, ref limit, .. }) if limit == "limits.tool_dir_bytes"
        ));
    }
}
