//! The fake Kubernetes API server's own tests (`canaryd_testkit::fake_apiserver`): that it serves what
//! kube-apiserver serves, the way kube-apiserver serves it, for what canaryd uses, through the real kube client.
//! One test binary, a module per area.

mod fake_apiserver_crds;
mod fake_apiserver_crud;
mod fake_apiserver_patch_types;
mod fake_apiserver_watch;
mod fake_apiserver_workloads;
