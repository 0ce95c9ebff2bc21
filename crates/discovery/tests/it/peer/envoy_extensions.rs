//! WasmPlugin and TrafficExtension through a real Envoy (the pip Envoy 1.40 has the `envoy.wasm.runtime.v8`
//! runtime and the Lua filter): a sidecar with one Sidecar `ingress` port on 127.0.0.1 forwarding to
//! a local echo app, so every request crosses an inbound connection manager.
//!
//! The Wasm modules are built by the test itself, byte by byte ([`header_module`]): a proxy-wasm
//! (ABI 0.2.1) module that adds one response header. A WasmPlugin whose module changes is delivered
//! over ECDS alone: the new header is seen while Envoy's listener version and its LDS update count
//! stay as they were. Needs Envoy (scripts/install-envoy.sh).

use std::{net::SocketAddr, path::Path, time::Duration};

use meshpilot_testing::{
    AdsApi, EchoServer, Envoy, Plane, PlaneOptions, free_port, http_get, request, wait_for, write_atomic,
};

use crate::support::NS;

/// Appends `n` as unsigned LEB128.
fn leb(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A length-prefixed byte vector (names, section bodies).
fn sized(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    leb(&mut out, bytes.len());
    out.extend_from_slice(bytes);
    out
}

/// A Wasm section: id, size, body.
fn section(id: u8, items: usize, body: &[u8]) -> Vec<u8> {
    let mut content = Vec::new();
    leb(&mut content, items);
    content.extend_from_slice(body);
    let mut out = vec![id];
    out.extend(sized(&content));
    out
}

/// A proxy-wasm module (ABI 0.2.1) whose HTTP filter adds the response header `x-wasm: value`
/// (`value` under 48 bytes). Exports: `memory`, `proxy_abi_version_0_2_1`, `proxy_on_memory_allocate`
/// and `malloc` (a bump allocator), `proxy_on_context_create`, `proxy_on_vm_start`,
/// `proxy_on_configure`, `proxy_on_response_headers` (which calls the host's
/// `proxy_add_header_map_value` for the response headers, map type 2).
fn header_module(value: &str) -> Vec<u8> {
    assert!(value.len() < 48);
    const I32: u8 = 0x7f;
    let func_type = |params: &[u8], results: &[u8]| {
        let mut t = vec![0x60];
        t.extend(sized(params));
        t.extend(sized(results));
        t
    };
    let types = [
        func_type(&[I32; 5], &[I32]), // 0: proxy_add_header_map_value
        func_type(&[], &[]),          // 1: proxy_abi_version_0_2_1
        func_type(&[I32], &[I32]),    // 2: allocate
        func_type(&[I32; 2], &[]),    // 3: context_create
        func_type(&[I32; 3], &[I32]), // 4: on_response_headers
        func_type(&[I32; 2], &[I32]), // 5: on_vm_start, on_configure
    ];
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    module.extend(section(1, types.len(), &types.concat()));
    let mut import = sized(b"env");
    import.extend(sized(b"proxy_add_header_map_value"));
    import.extend([0x00, 0x00]); // function of type 0
    module.extend(section(2, 1, &import));
    module.extend(section(3, 6, &[1, 2, 3, 4, 5, 5])); // functions 1..=6
    module.extend(section(5, 1, &[0x00, 16])); // memory: 16 pages, no maximum
    module.extend(section(6, 1, &[I32, 0x01, 0x41, 0x80, 0x20, 0x0b])); // mutable global: 4096
    let exports: Vec<(&[u8], u8, u8)> = vec![
        (b"memory", 0x02, 0),
        (b"proxy_abi_version_0_2_1", 0x00, 1),
        (b"proxy_on_memory_allocate", 0x00, 2),
        (b"malloc", 0x00, 2),
        (b"proxy_on_context_create", 0x00, 3),
        (b"proxy_on_response_headers", 0x00, 4),
        (b"proxy_on_vm_start", 0x00, 5),
        (b"proxy_on_configure", 0x00, 6),
    ];
    let mut body = Vec::new();
    for (name, kind, index) in &exports {
        body.extend(sized(name));
        body.extend([*kind, *index]);
    }
    module.extend(section(7, exports.len(), &body));
    let bodies: [&[u8]; 6] = [
        &[0x00, 0x0b],
        // global.get 0; global.get 0; local.get 0; i32.add; global.set 0
        &[0x00, 0x23, 0x00, 0x23, 0x00, 0x20, 0x00, 0x6a, 0x24, 0x00, 0x0b],
        &[0x00, 0x0b],
        // add_header(2, key @0 len 6, value @16 len N); drop; i32.const 0 (Continue)
        &[
            0x00,
            0x41,
            0x02,
            0x41,
            0x00,
            0x41,
            0x06,
            0x41,
            0x10,
            0x41,
            value.len() as u8,
            0x10,
            0x00,
            0x1a,
            0x41,
            0x00,
            0x0b,
        ],
        &[0x00, 0x41, 0x01, 0x0b],
        &[0x00, 0x41, 0x01, 0x0b],
    ];
    let code: Vec<u8> = bodies.iter().flat_map(|b| sized(b)).collect();
    module.extend(section(10, bodies.len(), &code));
    let mut data = vec![0x00, 0x41, 0x00, 0x0b];
    data.extend(sized(b"x-wasm"));
    data.extend([0x00, 0x41, 0x10, 0x0b]);
    data.extend(sized(value.as_bytes()));
    module.extend(section(11, 2, &data));
    module
}

struct Setup {
    dir: tempfile::TempDir,
    plane: Plane,
    envoy: Envoy,
    /// The ingress port forwarding to the app.
    port: SocketAddr,
    _app: EchoServer,
}

async fn setup(api: AdsApi) -> Setup {
    let app = EchoServer::start("app").await.unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let sidecar = format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: app, namespace: {NS}}}\nspec:\n  \
         workloadSelector: {{labels: {{app: app}}}}\n  ingress:\n  \
         - port: {{number: {port}, protocol: HTTP, name: http}}\n    defaultEndpoint: 127.0.0.1:{app_port}\n",
        app_port = app.addr.port()
    );
    write_atomic(dir.path(), "sidecar.yaml", &sidecar);
    let plane = Plane::start_with(PlaneOptions::config_dir(dir.path())).await.unwrap();
    let envoy = Envoy::start(&plane.sidecar("app", NS, api)).await.unwrap();
    Setup { dir, plane, envoy, port: ([127, 0, 0, 1], port).into(), _app: app }
}

impl Setup {
    /// Sends requests until a response's header `name` is `want`; returns that response's status line
    /// and headers (lower case).
    async fn wait_header(&self, name: &str, want: &str) -> String {
        wait_for(&format!("{name}: {want}"), Duration::from_secs(30), async || {
            let r = request(self.port, "app.example", "/", &[]).await.ok()?;
            (r.status == 200 && r.header(name) == Some(want)).then(|| r.head.clone())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.envoy.log_tail(60)))
    }

    async fn stat(&self, name: &str) -> u64 {
        self.envoy.stat(name).await.unwrap().unwrap_or(0)
    }

    async fn assert_no_nack(&self) {
        self.envoy.assert_no_rejected_updates().await;
    }
}

fn wasm_plugin(name: &str, url: &Path) -> String {
    format!(
        "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  \
         selector: {{matchLabels: {{app: app}}}}\n  url: file://{}\n",
        url.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wasm_module_swapped_over_ecds_changes_responses_without_a_listener_push() {
    wasm_module_swap(AdsApi::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wasm_module_swapped_over_delta_ecds_changes_responses_without_a_listener_push() {
    wasm_module_swap(AdsApi::Delta).await;
}

/// A WasmPlugin's module changes: the new module's header is seen while the listeners stay as they
/// were (same dump, version and LDS update count).
async fn wasm_module_swap(api: AdsApi) {
    let s = setup(api).await;
    let (a, b) = (s.dir.path().join("a.wasm"), s.dir.path().join("b.wasm"));
    std::fs::write(&a, header_module("module-a")).unwrap();
    std::fs::write(&b, header_module("module-b")).unwrap();
    write_atomic(s.dir.path(), "plugin.yaml", &wasm_plugin("header", &a));
    s.wait_header("x-wasm", "module-a").await;
    s.assert_no_nack().await;
    let lds_updates = s.stat("listener_manager.lds.update_success").await;
    let lds_version = s.stat("listener_manager.lds.version").await;
    let (_, dump) = s.envoy.admin_get("/config_dump?resource=dynamic_listeners").await.unwrap();

    // Same placement, another module: ECDS only.
    write_atomic(s.dir.path(), "plugin.yaml", &wasm_plugin("header", &b));
    s.wait_header("x-wasm", "module-b").await;
    assert_eq!(s.stat("listener_manager.lds.update_success").await, lds_updates, "LDS was pushed");
    assert_eq!(s.stat("listener_manager.lds.version").await, lds_version);
    let (_, after) = s.envoy.admin_get("/config_dump?resource=dynamic_listeners").await.unwrap();
    assert_eq!(after, dump, "listeners changed");
    let ecds = s.envoy.admin_get("/config_dump?resource=ecds_filters").await.unwrap().1;
    assert!(
        ecds.contains("extensions.istio.io/trafficextension/default.header~istio-translated-wasmplugin"),
        "{ecds}"
    );
    assert!(ecds.contains("b.wasm"), "{ecds}");
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lua_traffic_extension_changes_responses_of_the_selected_workload_only() {
    let s = setup(AdsApi::Sotw).await;
    let lua = |name: &str, app: &str, header: &str| {
        format!(
            "apiVersion: extensions.istio.io/v1alpha1\nkind: TrafficExtension\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  \
             selector: {{matchLabels: {{app: {app}}}}}\n  phase: AUTHN\n  lua:\n    inlineCode: |\n      \
             function envoy_on_response(h)\n        h:headers():add(\"{header}\", \"yes\")\n      end\n---\n"
        )
    };
    write_atomic(
        s.dir.path(),
        "lua.yaml",
        &format!("{}{}", lua("mine", "app", "x-lua-mine"), lua("theirs", "other", "x-lua-theirs")),
    );
    let headers = s.wait_header("x-lua-mine", "yes").await;
    assert!(!headers.contains("x-lua-theirs"), "{headers}");
    s.assert_no_nack().await;

    // A WasmPlugin with an unusable URL is reported with its field path and changes nothing else.
    write_atomic(
        s.dir.path(),
        "bad.yaml",
        &format!(
            "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: bad, namespace: {NS}}}\nspec:\n  url: http:///no-host.wasm\n"
        ),
    );
    let finding = wait_for("the bad plugin's finding", Duration::from_secs(20), async || {
        let (_, body) = http_get(s.plane.http, "/debug/configstatusz", &[]).await.ok()?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        json["pushContextFindings"]
            .as_array()?
            .iter()
            .filter_map(|f| f.as_str())
            .find(|f| f.contains("WasmPlugin/default/bad"))
            .map(str::to_string)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(finding.contains(" spec.url: "), "{finding}");
    assert!(finding.contains("no host"), "{finding}");
    s.wait_header("x-lua-mine", "yes").await;
    s.assert_no_nack().await;
}
