//! AuthorizationPolicy → RBAC filter building (`networking::authz::build_http`):
//!
//! - `authz/allow-full-rule`: one policy, Istio's `allow-full-rule-in.yaml` (every `from`/`to`/`when`
//!   field, both forms, with `*` patterns and path templates);
//! - `authz/namespace-100`: 100 ALLOW/DENY policies in one namespace (generated: principals,
//!   namespaces, methods, paths, ports, a header condition; every fourth one DENY), as a proxy with a
//!   busy namespace sees them.
//!
//! Each iteration builds the filters and encodes them (what a listener carries).
//!
//! Run: `cargo bench -p meshpilot-networking --bench authz`.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

#[allow(dead_code)] // the test helpers; each bench uses a few
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use meshpilot_networking::authz::{AuthzContext, build_http};
use model::Config;
use prost::Message;
use support::{corpus, parse, parse_file};

fn generated(n: usize) -> Vec<Arc<Config>> {
    let mut yaml = String::new();
    for i in 0..n {
        let action = if i % 4 == 3 { "DENY" } else { "ALLOW" };
        yaml.push_str(&format!(
            r#"---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: policy-{i}, namespace: bench}}
spec:
  action: {action}
  selector: {{matchLabels: {{app: app-{i}}}}}
  rules:
  - from:
    - source:
        principals: ["cluster.local/ns/bench/sa/client-{i}", "cluster.local/ns/other/sa/*"]
        namespaces: ["bench", "team-{i}-*"]
    to:
    - operation:
        methods: ["GET", "POST"]
        paths: ["/api/v{i}/*", "/items/{{*}}/detail", "/static/*.css"]
        ports: ["8080"]
    when:
    - key: request.headers[x-tenant]
      values: ["tenant-{i}", "shared-*"]
  - to:
    - operation:
        notPaths: ["/admin/*"]
        hosts: ["svc-{i}.bench.svc.cluster.local", "*.example.com"]
"#
        ));
    }
    parse(&yaml, "bench").into_iter().map(Arc::new).collect()
}

fn bench(c: &mut Criterion) {
    let full: Vec<Arc<Config>> = parse_file(
        &corpus().join("pilot/pkg/security/authz/builder/testdata/http/allow-full-rule-in.yaml"),
        "foo",
    )
    .into_iter()
    .map(Arc::new)
    .collect();
    let many = generated(100);
    assert_eq!((full.len(), many.len()), (1, 100));
    let aliases = vec!["old-td".to_string()];
    let ctx = AuthzContext {
        trust_domain: "cluster.local",
        trust_domain_aliases: &aliases,
        providers: &[],
        services: &[],
        is_gateway: false,
    };
    let mut group = c.benchmark_group("authz");
    for (name, policies) in [("allow-full-rule", &full), ("namespace-100", &many)] {
        let out = build_http(policies, &ctx);
        assert!(out.findings.is_empty(), "{name}: {:?}", out.findings);
        let bytes: usize = out.filters.iter().map(Message::encoded_len).sum();
        println!("authz/{name}: {} filters, {bytes} bytes", out.filters.len());
        group.bench_function(name, |b| {
            b.iter(|| {
                let out = build_http(policies, &ctx);
                out.filters.iter().map(Message::encode_to_vec).map(|v| v.len()).sum::<usize>()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
