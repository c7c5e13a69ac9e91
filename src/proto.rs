//! Generated code for the project's Dapr protos (`proto/`, compiled by `build.rs`).
//!
//! The modules mirror the protobuf package hierarchy so that prost's cross-package paths
//! (`super::super::common::v1::…`) resolve. Use the short re-exports: [`common`], [`runtime`],
//! [`internals`] and [`scheduler`]. [`etcd`] is etcd's v3 API, client side, for the etcd store.

/// The `dapr` protobuf package tree.
pub mod dapr {
    /// The `dapr.proto` protobuf package tree.
    pub mod proto {
        /// `dapr.proto.common.*`.
        pub mod common {
            /// `dapr.proto.common.v1`: HTTPExtension and the job failure policies.
            #[allow(clippy::all, clippy::pedantic, missing_docs)]
            pub mod v1 {
                tonic::include_proto!("dapr.proto.common.v1");
            }
        }
        /// `dapr.proto.runtime.*`.
        pub mod runtime {
            /// `dapr.proto.runtime.v1`: the jobs API of the `Dapr` service and the app callbacks.
            #[allow(clippy::all, clippy::pedantic, missing_docs)]
            pub mod v1 {
                tonic::include_proto!("dapr.proto.runtime.v1");
            }
        }
        /// `dapr.proto.internals.*`.
        pub mod internals {
            /// `dapr.proto.internals.v1`: the HTTP jobs body and the Scheduler's job event.
            #[allow(clippy::all, clippy::pedantic, missing_docs)]
            pub mod v1 {
                tonic::include_proto!("dapr.proto.internals.v1");
            }
        }
        /// `dapr.proto.placement.*`.
        pub mod placement {
            /// `dapr.proto.placement.v1`: Dapr 1.18's actor placement service.
            #[allow(clippy::all, clippy::pedantic, missing_docs)]
            pub mod v1 {
                tonic::include_proto!("dapr.proto.placement.v1");
            }
        }
        /// `dapr.proto.scheduler.*`.
        pub mod scheduler {
            /// `dapr.proto.scheduler.v1`: the Scheduler control-plane service.
            #[allow(clippy::all, clippy::pedantic, missing_docs)]
            pub mod v1 {
                tonic::include_proto!("dapr.proto.scheduler.v1");
            }
        }
    }
}

/// The `jobsd` protobuf package tree: our own records, not a Dapr wire format.
pub mod jobsd {
    /// `jobsd.store.*`.
    pub mod store {
        /// `jobsd.store.v1`: stored jobs and counters.
        #[allow(clippy::all, clippy::pedantic, missing_docs)]
        pub mod v1 {
            tonic::include_proto!("jobsd.store.v1");
        }
    }
    /// `jobsd.scheduler.*`.
    pub mod scheduler {
        /// `jobsd.scheduler.v1`: jobsd's side of a jobsd replica (`Jobs`: creates with jobsd's
        /// settings, and views), beside the Dapr Scheduler service.
        #[allow(clippy::all, clippy::pedantic, missing_docs)]
        pub mod v1 {
            tonic::include_proto!("jobsd.scheduler.v1");
        }
    }
    /// `jobsd.v1`: jobsd's own gRPC API (`jobsd.v1.Jobs`).
    #[allow(clippy::all, clippy::pedantic, missing_docs)]
    pub mod v1 {
        tonic::include_proto!("jobsd.v1");
    }
}

/// etcd's v3 API (`proto/third_party/etcd/`, trimmed to the KV, Watch and Lease services): what the etcd
/// store's client sends. Client code only, and not in [`FILE_DESCRIPTOR_SET`]: jobsd does not
/// serve it.
pub mod etcd {
    /// `etcdserverpb`: the KV, Watch and Lease services and their messages.
    #[allow(clippy::all, clippy::pedantic, missing_docs)]
    pub mod etcdserverpb {
        tonic::include_proto!("etcdserverpb");
    }
    /// `mvccpb`: a stored key-value and a watch event.
    #[allow(clippy::all, clippy::pedantic, missing_docs)]
    pub mod mvccpb {
        tonic::include_proto!("mvccpb");
    }
}

/// `dapr.proto.common.v1`.
pub use dapr::proto::common::v1 as common;
/// `dapr.proto.internals.v1`.
pub use dapr::proto::internals::v1 as internals;
/// `dapr.proto.placement.v1`.
pub use dapr::proto::placement::v1 as dapr_placement;
/// `dapr.proto.runtime.v1`.
pub use dapr::proto::runtime::v1 as runtime;
/// `dapr.proto.scheduler.v1`.
pub use dapr::proto::scheduler::v1 as dapr_scheduler;
/// `jobsd.scheduler.v1`.
pub use jobsd::scheduler::v1 as jobsd_replica;
/// `jobsd.store.v1`.
pub use jobsd::store::v1 as jobsd_store;
/// `jobsd.v1`.
pub use jobsd::v1 as jobsd_api;

/// Encoded `google.protobuf.FileDescriptorSet` of all the protos above and their imports
/// (with source info), for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));
