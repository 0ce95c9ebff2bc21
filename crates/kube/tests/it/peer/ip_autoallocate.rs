//! ServiceEntry VIP auto-allocation against a real kube-apiserver: the leader of
//! `istio-ip-autoallocate` writes `status.addresses` as istiod does, none for `resolution: NONE` or an
//! opted-out entry, and a new leader (a restart) reads the addresses back instead of reassigning them.

use crate::support;

use std::{sync::Arc, time::Duration};

use api::Kind;
use meshpilot_kube::{
    ip_autoallocate::IpAutoallocator,
    leader::{IP_AUTOALLOCATE_CONTROLLER, LeaderElectionOptions},
    testenv::TestEnv,
};
use model::{ConfigStore, ConfigStoreController, shutdown_channel};
use serde_json::{Value, json};
use support::{namespace, start, wait_for};

fn service_entry(ns: &str, name: &str, host: &str, resolution: &str, labels: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{{labels}}}\n\
         spec:\n  hosts: [{host}]\n  ports: [{{number: 443, name: tls, protocol: TLS}}]\n  resolution: {resolution}\n"
    )
}

fn addresses(source: &dyn ConfigStore, ns: &str, name: &str) -> Option<Value> {
    source.get(Kind::ServiceEntry, ns, name)?.status.as_ref()?.get("addresses").cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_writes_status_addresses_and_a_restart_keeps_them() {
    let env = TestEnv::shared_by(file!());
    let ns = "ipalloc";
    namespace(env, ns);
    env.kubectl_apply(&service_entry(ns, "api", "api.example.com", "DNS", "")).unwrap();
    env.kubectl_apply(&service_entry(ns, "none", "none.example.com", "NONE", "")).unwrap();
    let opt_out = "networking.istio.io/enable-autoallocate-ip: \"false\"";
    env.kubectl_apply(&service_entry(ns, "optout", "optout.example.com", "DNS", opt_out)).unwrap();
    let running = start(env, &[ns], &[Kind::ServiceEntry]).await;
    running.synced().await;
    let source: Arc<dyn ConfigStoreController> = Arc::new(running.source.clone());
    let client = meshpilot_kube::client::connection(env.client_config().await.unwrap()).unwrap().client;
    let options = LeaderElectionOptions {
        namespace: ns.into(),
        identity: "replica-a".into(),
        ..LeaderElectionOptions::default()
    }
    .with_ttl(Duration::from_secs(2));

    let (trigger, shutdown) = shutdown_channel();
    let task = IpAutoallocator::new(client.clone(), source.clone()).start(options.clone(), shutdown);
    wait_for("api's status.addresses", || addresses(source.as_ref(), ns, "api").is_some()).await;
    assert_eq!(
        addresses(source.as_ref(), ns, "api").unwrap(),
        json!([{"value": "240.240.0.1", "host": "api.example.com"}, {"value": "2001:2::1", "host": "api.example.com"}])
    );
    // The lock is istiod's: a ConfigMap named istio-ip-autoallocate in the election namespace.
    let lock =
        env.kubectl(&["get", "configmap", IP_AUTOALLOCATE_CONTROLLER, "-n", ns, "-o", "name"]).unwrap();
    assert!(lock.contains(IP_AUTOALLOCATE_CONTROLLER), "{lock}");
    trigger.trigger();
    task.await.unwrap();

    // A new leader (a restart) with a new entry: api keeps its addresses, db gets the next ones.
    env.kubectl_apply(&service_entry(ns, "db", "db.example.com", "STATIC", "")).unwrap();
    let (trigger, shutdown) = shutdown_channel();
    let options = LeaderElectionOptions { identity: "replica-b".into(), ..options };
    let task = IpAutoallocator::new(client, source.clone()).start(options, shutdown);
    wait_for("db's status.addresses", || addresses(source.as_ref(), ns, "db").is_some()).await;
    assert_eq!(
        addresses(source.as_ref(), ns, "db").unwrap(),
        json!([{"value": "240.240.0.2", "host": "db.example.com"}, {"value": "2001:2::2", "host": "db.example.com"}])
    );
    assert_eq!(addresses(source.as_ref(), ns, "api").unwrap()[0]["value"], "240.240.0.1");
    assert_eq!(addresses(source.as_ref(), ns, "none"), None, "resolution NONE gets no address");
    assert_eq!(addresses(source.as_ref(), ns, "optout"), None, "opted out");
    trigger.trigger();
    task.await.unwrap();
}
