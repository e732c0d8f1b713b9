//! `throughput_optimizer._native`, the extension module of the Python package: a command line
//! run in-process through the library's `cli::dispatch`, exactly as the binary runs it.
//!
//! The run goes on a worker thread; the calling thread, holding the GIL only between waits,
//! forwards the search's progress and the stderr notices to Python as they come and checks for
//! Ctrl-C, which sets the search's stop flag. The Python side (`throughput_optimizer`, next to
//! this crate) turns keyword arguments into a command line and the outputs into dicts and
//! DataFrames; errors are raised here as its exception classes, with the binary's message.

use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;
use throughput_optimizer::cli::dispatch::{self, Session};
use throughput_optimizer::cli::PlanError;
use throughput_optimizer::report::{self, Artifact, Destination};

/// How often the calling thread looks for Ctrl-C while the run has nothing to report.
const POLL: Duration = Duration::from_millis(50);

/// What the worker tells the calling thread while it runs.
enum Event {
    Progress(u64, u64),
    Stderr(String),
}

/// A file output: the flag that named it, its path, its contents, and whether it was written.
type FileOutput = (String, String, String, bool);

/// The worker's session: stdout kept, stderr and progress sent to the calling thread, files
/// written as the binary writes them (except those of the flags in `capture`, only kept).
struct Embedded<'a> {
    events: mpsc::Sender<Event>,
    stop: &'a AtomicBool,
    capture: &'a [String],
    stdout: String,
    files: Vec<FileOutput>,
}

impl Session for Embedded<'_> {
    fn emit(&mut self, artifact: Artifact) -> Result<(), PlanError> {
        match &artifact.destination {
            Destination::Stdout => self.stdout.push_str(&artifact.contents),
            Destination::Stderr => {
                let _ = self.events.send(Event::Stderr(artifact.contents));
            }
            Destination::File { flag, path } => {
                let write = !self.capture.iter().any(|c| c == flag);
                if write {
                    report::write(&artifact)?;
                }
                self.files.push((flag.to_string(), path.display().to_string(), artifact.contents, write));
            }
        }
        Ok(())
    }

    fn progress(&self, done: u64, total: u64) {
        let _ = self.events.send(Event::Progress(done, total));
    }

    fn stop_flag(&self) -> Option<&AtomicBool> {
        Some(self.stop)
    }
}

/// The package's exception class `name` (`UsageError`, `RuntimeError`) carrying `message`, the
/// binary's exit code and the flag the error is about.
fn raise(py: Python<'_>, name: &str, message: String, exit_code: u8, field: Option<&str>) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let class = py.import("throughput_optimizer._errors")?.getattr(name)?;
        let value = class.call1((message.clone(),))?;
        value.setattr("exit_code", exit_code)?;
        value.setattr("field", field)?;
        Ok(PyErr::from_value(value))
    })();
    made.unwrap_or_else(|e| e)
}

fn plan_error(py: Python<'_>, e: &PlanError) -> PyErr {
    let name = match e.kind() {
        throughput_optimizer::error::ErrorKind::Usage => "UsageError",
        throughput_optimizer::error::ErrorKind::Runtime => "RuntimeError",
    };
    raise(py, name, e.to_string(), e.exit_code(), e.field())
}

/// What the calling thread does with the worker's events: call the Python callbacks; the
/// first exception they raise (or Ctrl-C) stops the run and is raised once it has stopped.
struct Forward<'py> {
    progress: Option<Bound<'py, PyAny>>,
    stderr: Option<Bound<'py, PyAny>>,
    failure: Option<PyErr>,
}

impl Forward<'_> {
    fn handle(&mut self, event: Event, stop: &AtomicBool) {
        if self.failure.is_some() {
            return;
        }
        let called = match (event, &self.progress, &self.stderr) {
            // A callback that returns False asks the run to stop.
            (Event::Progress(done, total), Some(cb), _) => cb.call1((done, total)).and_then(|v| {
                if v.is_instance_of::<pyo3::types::PyBool>() && !v.is_truthy()? {
                    stop.store(true, Ordering::Relaxed);
                }
                Ok(())
            }),
            (Event::Stderr(text), _, Some(cb)) => cb.call1((text,)).map(drop),
            _ => Ok(()),
        };
        if let Err(e) = called {
            self.failure = Some(e);
            stop.store(true, Ordering::Relaxed);
        }
    }
}

/// Run `argv` (the command line without the program name) as the binary would.
///
/// Returns the text the binary prints on stdout (the help text for `--help`) and every file
/// output as `(flag, path, contents, written)`; the files of the flags in `capture` are kept,
/// not written. `progress(done, total)` is called after each searched candidate (returning
/// `False` stops the run), `stderr(text)` with each notice the binary prints on stderr.
fn execute<'py>(
    py: Python<'py>,
    argv: Vec<String>,
    progress: Option<Bound<'py, PyAny>>,
    stderr: Option<Bound<'py, PyAny>>,
    capture: Vec<String>,
) -> PyResult<(String, Vec<FileOutput>)> {
    let argv: Vec<OsString> = std::iter::once("throughput-optimizer".into()).chain(argv.into_iter().map(OsString::from)).collect();
    let invocation = match dispatch::parse(&argv) {
        Ok(invocation) => invocation,
        // --help and --version: their text is the output.
        Err(e) if !e.use_stderr() => return Ok((e.render().to_string(), Vec::new())),
        Err(e) => {
            let text = e.render().to_string();
            let message = text.trim_end().strip_prefix("error: ").unwrap_or(text.trim_end()).to_string();
            return Err(raise(py, "UsageError", message, 2, None));
        }
    };
    let stop = AtomicBool::new(false);
    let (events, received) = mpsc::channel();
    let mut forward = Forward { progress, stderr, failure: None };
    let (result, stdout, files) = std::thread::scope(|scope| {
        let (stop, capture) = (&stop, capture.as_slice());
        let worker = scope.spawn(move || {
            let mut session = Embedded { events, stop, capture, stdout: String::new(), files: Vec::new() };
            let result = dispatch::execute(invocation, &mut session);
            (result, session.stdout, session.files)
        });
        // The receiver moves into each wait and back: it may not be shared with the thread
        // that runs while the GIL is released.
        let mut received = received;
        loop {
            let (back, event) = py.detach(move || {
                let event = received.recv_timeout(POLL);
                (received, event)
            });
            received = back;
            match event {
                Ok(event) => forward.handle(event, stop),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if forward.failure.is_none() {
                if let Err(e) = py.check_signals() {
                    forward.failure = Some(e);
                    stop.store(true, Ordering::Relaxed);
                }
            }
        }
        py.detach(move || worker.join())
    })
    .map_err(|panic| {
        let what = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned());
        raise(py, "RuntimeError", format!("internal error: {}", what.unwrap_or_default()), 1, None)
    })?;
    if let Some(e) = forward.failure {
        return Err(e);
    }
    result.map_err(|e| plan_error(py, &e))?;
    Ok((stdout, files))
}

/// The long flags of a command (`plan`, `calibrate`, `merge` or `price`) and how each takes values:
/// `switch` (no value), `value` (one), `values` (one or more after the flag) or `append` (the
/// flag repeated per value).
fn flags<'py>(py: Python<'py>, command: &str) -> PyResult<Bound<'py, PyDict>> {
    use clap::CommandFactory;
    let cmd = match command {
        "plan" => throughput_optimizer::cli::RawArgs::command(),
        "calibrate" => throughput_optimizer::cli::calibrate::CalibrateArgs::command(),
        "merge" => throughput_optimizer::cli::merge::MergeArgs::command(),
        "price" => throughput_optimizer::cli::price::PriceArgs::command(),
        other => return Err(raise(py, "UsageError", format!("no command `{other}`: one of plan, calibrate, merge, price"), 2, None)),
    };
    let out = PyDict::new(py);
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let kind = match arg.get_action() {
            clap::ArgAction::Append => "append",
            a if !a.takes_values() => "switch",
            _ if arg.get_num_args().is_some_and(|n| n.max_values() > 1) => "values",
            _ => "value",
        };
        out.set_item(long, kind)?;
    }
    Ok(out)
}

/// Positional argument `i` of a call from Python, `None` when absent or `None`.
fn arg<'py, T: FromPyObjectOwned<'py>>(args: &Bound<'py, PyTuple>, i: usize) -> PyResult<Option<T>> {
    match args.get_item(i) {
        Ok(v) if !v.is_none() => v.extract().map(Some).map_err(Into::into),
        _ => Ok(None),
    }
}

/// `_native.execute(argv, progress=None, stderr=None, capture=())`, called positionally.
fn execute_py(args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
    let py = args.py();
    let argv: Vec<String> = arg(args, 0)?.unwrap_or_default();
    let callable = |i| args.get_item(i).ok().filter(|v| !v.is_none());
    let out = execute(py, argv, callable(1), callable(2), arg(args, 3)?.unwrap_or_default())?;
    Ok(out.into_pyobject(py)?.into_any().unbind())
}

/// `_native.flags(command)`.
fn flags_py(args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
    let command: String = arg(args, 0)?.unwrap_or_default();
    Ok(flags(args.py(), &command)?.into_any().unbind())
}

fn populate(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("execute", PyCFunction::new_closure(py, Some(c"execute"), Some(EXECUTE_DOC), execute_py)?)?;
    m.add("flags", PyCFunction::new_closure(py, Some(c"flags"), Some(FLAGS_DOC), flags_py)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

const EXECUTE_DOC: &std::ffi::CStr = c"execute(argv, progress=None, stderr=None, capture=())\n--\n\n\
Run argv (without the program name) as the binary would: (stdout text, [(flag, path, contents, written)]).";
const FLAGS_DOC: &std::ffi::CStr = c"flags(command)\n--\n\nThe long flags of plan, calibrate, merge or price and how each takes values.";

/// The module's definition. The module is built by hand rather than with PyO3's macros: they
/// would compile `syn` with more features than the library's derives use, and so rebuild every
/// derive and the library itself in `pip install .` instead of reusing the release build.
static mut MODULE: pyo3::ffi::PyModuleDef = pyo3::ffi::PyModuleDef {
    m_base: pyo3::ffi::PyModuleDef_HEAD_INIT,
    m_name: c"throughput_optimizer._native".as_ptr(),
    m_doc: c"The throughput-optimizer command line run in-process.".as_ptr(),
    m_size: 0,
    m_methods: std::ptr::null_mut(),
    m_slots: std::ptr::null_mut(),
    m_traverse: None,
    m_clear: None,
    m_free: None,
};

/// The interpreter's entry point for `import throughput_optimizer._native`.
///
/// # Safety
/// Called by the interpreter, with the GIL held, once per process.
#[no_mangle]
pub unsafe extern "C" fn PyInit__native() -> *mut pyo3::ffi::PyObject {
    // SAFETY: MODULE lives for the whole process and is only handed to the interpreter here.
    let module = unsafe { pyo3::ffi::PyModule_Create(std::ptr::addr_of_mut!(MODULE)) };
    if module.is_null() {
        return module;
    }
    Python::attach(|py| {
        // SAFETY: `module` is the new, owned module object just created.
        let module = unsafe { Bound::from_owned_ptr(py, module) };
        match module.cast_into::<PyModule>().map_err(PyErr::from).and_then(|m| populate(&m).map(|()| m)) {
            Ok(m) => m.into_ptr(),
            Err(e) => {
                e.restore(py);
                std::ptr::null_mut()
            }
        }
    })
}
