//! daprd's internal gRPC API, the part actors need (`dapr.proto.internals.v1.
//! ServiceInvocation`: `CallActor`, `CallActorReminder`), served on `--dapr-internal-grpc-port`
//! when the sidecar uses placement: other sidecars (jobsd or daprd) call the actors this one
//! hosts. An actor that does not live here (any more) is refused with daprd's
//! "remote actor moved", which tells the caller to look it up again.

use tonic::{Code, Request, Response, Status};

use crate::actors::placement::remote::{invoke_response, method_call};
use crate::actors::{ActorError, ActorRef, ActorRuntime};
use crate::proto::internals::service_invocation_server::{
    ServiceInvocation, ServiceInvocationServer,
};
use crate::proto::internals::{self as iv1};

/// The internal service over one sidecar's actor runtime.
#[derive(Clone)]
pub struct Internal {
    actors: ActorRuntime,
    namespace: String,
}

/// The tonic server of the internal service.
pub fn service(actors: ActorRuntime, namespace: &str) -> ServiceInvocationServer<Internal> {
    ServiceInvocationServer::new(Internal {
        actors,
        namespace: namespace.to_owned(),
    })
    .max_decoding_message_size(usize::MAX)
    .max_encoding_message_size(usize::MAX)
}

#[tonic::async_trait]
impl ServiceInvocation for Internal {
    async fn call_actor(
        &self,
        request: Request<iv1::InternalInvokeRequest>,
    ) -> Result<Response<iv1::InternalInvokeResponse>, Status> {
        let call = method_call(request.into_inner())
            .ok_or_else(|| Status::new(Code::InvalidArgument, "missing actor"))?;
        match self.actors.invoke_from_peer(call).await {
            Ok(answer) => Ok(Response::new(invoke_response(answer))),
            Err(ActorError::Call(message)) if message.starts_with("error invoke actor method") => {
                Err(Status::new(Code::Internal, message))
            }
            Err(e) => Err(Status::new(
                Code::Internal,
                format!("error invoke actor method: {e}"),
            )),
        }
    }

    async fn call_actor_reminder(
        &self,
        request: Request<iv1::Reminder>,
    ) -> Result<Response<()>, Status> {
        let reminder = request.into_inner();
        let actor = ActorRef::new(&reminder.actor_type, &reminder.actor_id);
        self.actors
            .remind_from_peer(actor, &reminder.name, reminder.data, &self.namespace)
            .await
            .map(Response::new)
            .map_err(|message| Status::new(Code::Internal, message))
    }
}
