//! The LangGraph Platform API: the SDKs' shapes against the real daemon, through plain HTTP
//! under both bases (`/api` and DeerFlow's `/api/langgraph`).

mod assistants;
mod deerflow_rest;
mod stream;
mod threads;
