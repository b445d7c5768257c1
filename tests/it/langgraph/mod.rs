//! The LangGraph Platform API: the SDKs' shapes against the real daemon and the scripted fake
//! model, through plain HTTP under both bases (`/api` and DeerFlow's `/api/langgraph`).

mod assistants;
mod deerflow_rest;
mod runs;
mod runs_multitask;
mod stream;
mod threads;
