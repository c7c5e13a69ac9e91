//! The bench and soak apps' accept loop, shared by the example programs
//! (`#[path = "common/accept.rs"] mod accept;`).

use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// Accepts connections on `listener` for ever, with `TCP_NODELAY` set (the apps answer small
/// bodies; without it a reply waits for the peer's delayed ACK), handing each to `serve`. An
/// accept error (e.g. out of file descriptors) is printed and retried after 10 ms rather than
/// ending the app.
pub async fn accept_loop(listener: TcpListener, mut serve: impl FnMut(TcpStream)) -> ! {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        serve(stream);
    }
}
