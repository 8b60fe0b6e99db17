//! errscope's scrub engine as the extension module `errscope.collector.scrub._engine`.
//!
//! This file is the only one that deals with Python (PyO3); every other module forbids
//! `unsafe`. Each call releases the GIL for the whole scan, and a panic inside the engine
//! (a bug: nothing is meant to panic on any input) is caught here and raised as
//! `EngineError`, so the caller can fail closed and mask the value whole.

pub mod engine;
mod printable;
mod pyjson;
pub mod translate;
pub mod validators;
pub mod views;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::panic::{catch_unwind, AssertUnwindSafe};

create_exception!(
    _engine,
    EngineError,
    PyException,
    "The engine failed on a value (a bug)."
);

type AllowTuple = (Vec<String>, Vec<String>, String, String);
type RuleTuple = (
    String,
    String,
    Vec<String>,
    Option<f64>,
    usize,
    Option<String>,
    Vec<AllowTuple>,
);

/// Compiled scrub rules (see engine.rs); immutable and safe to share between threads.
#[pyclass(frozen, module = "errscope.collector.scrub._engine")]
struct Engine {
    inner: engine::Engine,
}

#[pymethods]
impl Engine {
    /// rules: (id, regex, keywords, entropy, secret_group, validate, allowlists) each, with
    /// allowlists as (regexes, stopwords, target, condition); raises ValueError
    /// "<rule index>\t<field>\t<reason>" for a rule that cannot compile.
    #[new]
    #[pyo3(signature = (rules, hmac_key=None))]
    fn new(rules: Vec<RuleTuple>, hmac_key: Option<Vec<u8>>) -> PyResult<Self> {
        let specs = rules
            .into_iter()
            .map(
                |(id, regex, keywords, entropy, secret_group, validate, allow)| engine::RuleSpec {
                    id,
                    regex,
                    keywords,
                    entropy,
                    secret_group,
                    validate,
                    allowlists: allow
                        .into_iter()
                        .map(
                            |(regexes, stopwords, target, condition)| engine::AllowSpec {
                                regexes,
                                stopwords,
                                target,
                                condition,
                            },
                        )
                        .collect(),
                },
            )
            .collect();
        let inner = engine::Engine::new(specs, hmac_key).map_err(|e| {
            PyValueError::new_err(format!("{}\t{}\t{}", e.index, e.field, e.reason))
        })?;
        Ok(Engine { inner })
    }

    /// Merged, sorted (start, stop, rule index) byte spans to mask in `data`; with
    /// `first_only`, the first one found (or none): whether `data` holds a secret.
    #[pyo3(signature = (data, first_only=false))]
    fn find(
        &self,
        py: Python<'_>,
        data: &[u8],
        first_only: bool,
    ) -> PyResult<Vec<(usize, usize, usize)>> {
        let inner = &self.inner;
        py.detach(|| catch_unwind(AssertUnwindSafe(|| inner.find(data, first_only, 0))))
            .map_err(|_| EngineError::new_err("engine failure"))
    }

    /// (masked bytes, rule index of each masked finding), or None when nothing is masked.
    fn mask<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Vec<usize>)>> {
        let inner = &self.inner;
        let result = py
            .detach(|| catch_unwind(AssertUnwindSafe(|| inner.mask(data))))
            .map_err(|_| EngineError::new_err("engine failure"))?;
        Ok(result.map(|(out, indices)| (PyBytes::new(py, &out), indices)))
    }
}

/// Shannon entropy of `data` in bits per byte (gitleaks' `entropy`, the rules' floor).
#[pyfunction]
fn shannon_entropy(data: &[u8]) -> f64 {
    validators::shannon_entropy(data)
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add_function(wrap_pyfunction!(shannon_entropy, m)?)?;
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    Ok(())
}
