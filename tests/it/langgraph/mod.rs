//! The LangGraph Platform API: the SDKs' shapes against the real daemon and the scripted fake
//! model, through plain HTTP under both bases (`/api` and DeerFlow's `/api/langgraph`), and the
//! real Python and JS SDKs driving it.

mod assistants;
mod deerflow_rest;
mod runs;
mod runs_multitask;
mod sdk;
mod stream;
mod threads;
