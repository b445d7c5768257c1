//! The LangGraph Platform API (`/api` and `/api/langgraph`) as the official SDKs and
//! DeerFlow's web UI use it, against the real daemon binary and the scripted fake model:
//! plain HTTP per route family under both bases, and the SDKs' own scenario.

mod assistants;
mod deerflow_rest;
mod runs;
mod runs_multitask;
mod sdk;
mod stream;
mod threads;
