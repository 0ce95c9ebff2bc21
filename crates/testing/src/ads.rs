//! An ADS server of any resource source on a loopback port.

use std::net::SocketAddr;

use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use xds::{AdsServer, ConnectionRegistry, ResourceSource};

use crate::{HarnessError, error::io};

/// An [`AdsServer`] serving on a loopback port until dropped (or [`RunningAds::stop`]).
pub struct RunningAds<S: ResourceSource> {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its connection registry.
    pub registry: ConnectionRegistry<S::Node, S::Push>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl<S: ResourceSource> RunningAds<S> {
    /// Starts `server` on 127.0.0.1 (a free port, or `port` if given — to restart on the same one).
    ///
    /// # Errors
    /// [`HarnessError::Io`] if the port cannot be bound.
    pub async fn start(server: AdsServer<S>, port: Option<u16>) -> Result<Self, HarnessError> {
        let listener =
            TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).await.map_err(io("bind ADS port"))?;
        let addr = listener.local_addr().map_err(io("ADS local address"))?;
        let registry = server.registry().clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(listener, async { drop(rx.await) }));
        Ok(RunningAds { addr, registry, shutdown: Some(tx), task })
    }

    /// Stops serving and waits for the server task (open streams end).
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl<S: ResourceSource> Drop for RunningAds<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
