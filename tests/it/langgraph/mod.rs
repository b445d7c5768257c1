//! The LangGraph Platform API (`/api` and `/api/langgraph`) as the official SDKs and
//! DeerFlow's web UI use it, against the real daemon binary.

mod sdk;
