//! The HTTP route cases from Istio's tests.

use crate::{
    networking::virtual_service::tests::{check_all, http, routed},
    testutil::Want::{Error, Valid, Warning},
};

#[test]
fn http_route_cases_from_istio() {
    check_all(&[
        (
            "empty",
            &http("{}"),
            Error("spec.http[0].route", "HTTP route, redirect or direct_response is required"),
        ),
        (
            "no destination",
            &http("{route: [{}]}"),
            Error("spec.http[0].route[0].destination", "destination is required"),
        ),
        (
            "weighted",
            &http(
                "{route: [{destination: {host: foo.baz.south}, weight: 25}, {destination: {host: foo.baz.east}, weight: 75}]}",
            ),
            Valid,
        ),
        (
            "total weight > 100",
            &http(
                "{route: [{destination: {host: foo.baz.south}, weight: 550}, {destination: {host: foo.baz.east}, weight: 500}]}",
            ),
            Valid,
        ),
        (
            "total weight = 0",
            &http("{route: [{destination: {host: foo.baz.south}}, {destination: {host: foo.baz.east}}]}"),
            Error("spec.http[0].route", "total destination weight = 0"),
        ),
        (
            "negative weight",
            &http("{route: [{destination: {host: c}, weight: 75}, {destination: {host: c}, weight: -15}]}"),
            Error("spec.http[0].route[1].weight", "weight -15 < 0"),
        ),
        ("simple redirect", &http("{redirect: {uri: /lerp, authority: foo.biz}}"), Valid),
        (
            "prefix_rewrite redirect with prefix URI match",
            &http("{match: [{uri: {prefix: /foo}}], redirect: {prefixRewrite: /bar}}"),
            Valid,
        ),
        (
            "prefix_rewrite redirect with exact URI match",
            &http("{match: [{uri: {exact: /foo}}], redirect: {prefixRewrite: /bar}}"),
            Error(
                "spec.http[0].redirect.prefixRewrite",
                "redirect prefix_rewrite requires all URI matches to use prefix match type",
            ),
        ),
        (
            "prefix_rewrite redirect with regex URI match",
            &http("{match: [{uri: {regex: /foo.*}}], redirect: {prefixRewrite: /bar}}"),
            Error("spec.http[0].redirect.prefixRewrite", "requires all URI matches to use prefix match type"),
        ),
        (
            "prefix_rewrite redirect without URI match",
            &http("{match: [{headers: {x-foo: {exact: bar}}}], redirect: {prefixRewrite: /bar}}"),
            Valid,
        ),
        (
            "conflicting redirect and route",
            &routed("redirect: {uri: /lerp, authority: foo.biz}"),
            Error("spec.http[0].route", "HTTP route cannot contain both route and redirect"),
        ),
        (
            "redirect and fault",
            &http("{redirect: {uri: /lerp}, fault: {abort: {httpStatus: 500}}}"),
            Error("spec.http[0].fault", "HTTP route cannot contain both fault and redirect"),
        ),
        (
            "redirect and rewrite",
            &http("{redirect: {uri: /lerp}, rewrite: {uri: /a}}"),
            Error("spec.http[0].rewrite", "HTTP route rule cannot contain both rewrite and redirect"),
        ),
        (
            "redirect and direct response",
            &http("{redirect: {uri: /lerp}, directResponse: {status: 200}}"),
            Error(
                "spec.http[0].directResponse",
                "HTTP route rule cannot contain both direct_response and redirect",
            ),
        ),
        (
            "direct response and route",
            &routed("directResponse: {status: 200}"),
            Error("spec.http[0].route", "HTTP route cannot contain both route and direct_response"),
        ),
        (
            "direct response and fault",
            &http("{directResponse: {status: 200}, fault: {abort: {httpStatus: 500}}}"),
            Error("spec.http[0].fault", "HTTP route cannot contain both fault and direct_response"),
        ),
        (
            "direct response and rewrite",
            &http("{directResponse: {status: 200}, rewrite: {uri: /a}}"),
            Error("spec.http[0].rewrite", "HTTP route rule cannot contain both rewrite and direct_response"),
        ),
        (
            "valid headers",
            "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {request: {add: {name: ''}, set: {name: ''}, remove: [name]}, response: {add: {name: ''}, set: {name: ''}, remove: [name]}}}]}]",
            Valid,
        ),
        (
            "empty header name - request add",
            "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {request: {add: {'': value}}}}]}]",
            Error("spec.http[0].route[0].headers.request.add.", "header name cannot be empty"),
        ),
        (
            "empty header name - request remove",
            "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {request: {remove: ['']}}}]}]",
            Error("spec.http[0].route[0].headers.request.remove[0]", "header name cannot be empty"),
        ),
        (
            "empty header name - response set",
            "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {response: {set: {'': value}}}}]}]",
            Error("spec.http[0].route[0].headers.response.set.", "header name cannot be empty"),
        ),
        (
            "response may not set the host",
            &routed("headers: {response: {set: {host: a}}}"),
            Error(
                "spec.http[0].headers.response.set.host",
                "invalid header \"host\": cannot set Host header",
            ),
        ),
        (
            "request may not set a pseudo-header",
            &routed("headers: {request: {set: {':path': /a}}}"),
            Error("spec.http[0].headers.request.set.:path", "header cannot have \":\" prefix"),
        ),
        ("envoy escaped % set", &routed("headers: {response: {set: {i-love-istio: '100%%'}}}"), Valid),
        ("envoy variable set", &routed("headers: {response: {set: {name: '%HOSTNAME%'}}}"), Valid),
        (
            "envoy unescaped % set",
            &routed("headers: {response: {set: {name: 'abcd%oijasodifj'}}}"),
            Error("spec.http[0].headers.response.set.name", "header value configuration"),
        ),
        ("envoy variable add", &routed("headers: {response: {add: {name: 'hello %HOSTNAME%'}}}"), Valid),
        (
            "empty prefix header match",
            &routed("match: [{headers: {emptyprefix: {prefix: ''}}}]"),
            Error(
                "spec.http[0].match[0].headers.emptyprefix",
                "\"headers\": prefix string match should not be empty",
            ),
        ),
        ("header presence match", &routed("match: [{headers: {x-present: {}}}]"), Valid),
        (
            "invalid header name in match",
            &routed("match: [{headers: {'bad header': {exact: a}}}]"),
            Error("spec.http[0].match[0].headers.bad header", "is not a valid header name"),
        ),
        (
            "invalid mirror percent",
            &routed("mirrorPercent: 101"),
            Error("spec.http[0].mirrorPercent", "mirror_percent must have a max value of 100 (it has 101)"),
        ),
        (
            "invalid mirror percentage",
            &routed("mirrorPercentage: {value: 101}"),
            Error(
                "spec.http[0].mirrorPercentage.value",
                "mirror_percentage must have a max value of 100 (it has 101.000000)",
            ),
        ),
        ("valid mirror percentage", &routed("mirrorPercentage: {value: 1}"), Valid),
        (
            "negative mirror percentage",
            &routed("mirrorPercentage: {value: -1}"),
            Error(
                "spec.http[0].mirrorPercentage.value",
                "mirror_percentage must have a min value of 0 (it has -1.000000)",
            ),
        ),
        ("mirror", &routed("mirror: {host: foo.mirror, subset: v1, port: {number: 8080}}"), Valid),
        (
            "mirror without host",
            &routed("mirror: {subset: v1}"),
            Error("spec.http[0].mirror.host", "empty domain name not allowed"),
        ),
        (
            "mirrors without destination",
            &routed("mirrors: [{percentage: {value: 1}}]"),
            Error("spec.http[0].mirrors[0].destination", "destination is required for mirrors"),
        ),
        (
            "mirrors invalid mirror percentage",
            &routed(
                "mirrors: [{destination: {host: foo.baz}}, {destination: {host: foo.baz}, percentage: {value: 101}}]",
            ),
            Error(
                "spec.http[0].mirrors[1].percentage.value",
                "mirror percentage must have a max value of 100 (it has 101.000000)",
            ),
        ),
        (
            "mirrors valid mirror percentage",
            &routed(
                "mirrors: [{destination: {host: foo.baz}, percentage: {value: 1}}, {destination: {host: foo.baz}, percentage: {value: 50}}]",
            ),
            Valid,
        ),
        (
            "mirrors negative mirror percentage",
            &routed("mirrors: [{destination: {host: foo.baz}, percentage: {value: -1}}]"),
            Error(
                "spec.http[0].mirrors[0].percentage.value",
                "mirror percentage must have a min value of 0 (it has -1.000000)",
            ),
        ),
        (
            "conflicting mirror and mirrors",
            &routed("mirror: {host: foo.baz}, mirrors: [{destination: {host: foo.bar}}]"),
            Error("spec.http[0].mirrors", "HTTP route cannot contain both mirror and mirrors"),
        ),
        ("timeout", &routed("timeout: 1.5s"), Valid),
        (
            "bad timeout",
            &routed("timeout: 0.0001s"),
            Error("spec.http[0].timeout", "duration must be greater than 1ms"),
        ),
    ]);
}

#[test]
fn route_match_cases_from_istio() {
    let redirect = |m: &str| http(&format!("{{match: [{m}], redirect: {{uri: /, authority: foo.biz}}}}"));
    let delegate = |m: &str| http(&format!("{{match: [{m}], delegate: {{name: test, namespace: test}}}}"));
    check_all(&[
        ("prefix header match", &delegate("{headers: {header: {prefix: test}}}"), Valid),
        (
            "empty prefix header match (delegate)",
            &delegate("{headers: {header: {prefix: ''}}}"),
            Error("spec.http[0].match[0].headers.header", "prefix string match should not be empty"),
        ),
        ("exact header match", &delegate("{headers: {header: {exact: test}}}"), Valid),
        ("regex header match", &delegate("{headers: {header: {regex: test}}}"), Valid),
        ("exact without headers match", &redirect("{withoutHeaders: {header: {exact: test}}}"), Valid),
        ("regex without headers match", &redirect("{withoutHeaders: {header: {regex: test}}}"), Valid),
        (
            "regex without headers match ?",
            &redirect("{withoutHeaders: {header: {regex: '?'}}}"),
            Error(
                "spec.http[0].match[0].withoutHeaders.header",
                "\"withoutHeaders\": error parsing regexp: missing argument to repetition operator: `?`",
            ),
        ),
        ("regex without headers match *", &redirect("{withoutHeaders: {header: {regex: '*'}}}"), Valid),
        ("regex uri match", &delegate("{uri: {regex: test}}"), Valid),
        ("prefix uri match", &delegate("{uri: {prefix: test}}"), Valid),
        ("exact uri match", &delegate("{uri: {exact: test}}"), Valid),
        ("prefix queryParams match", &delegate("{queryParams: {q: {prefix: test}}}"), Valid),
        ("exact queryParams match", &delegate("{queryParams: {q: {exact: test}}}"), Valid),
        (
            "empty prefix match in method",
            &redirect("{method: {prefix: ''}}"),
            Error("spec.http[0].match[0].method", "\"method\": prefix string match should not be empty"),
        ),
        (
            "empty regex match in method",
            &redirect("{method: {regex: ''}}"),
            Error("spec.http[0].match[0].method", "\"method\": regex string match should not be empty"),
        ),
        ("empty prefix match in uri", &redirect("{uri: {prefix: ''}}"), Valid),
        (
            "empty regex match in uri",
            &redirect("{uri: {regex: ''}}"),
            Error("spec.http[0].match[0].uri", "\"uri\": regex string match should not be empty"),
        ),
        (
            "empty regex match in query",
            &redirect("{queryParams: {q: {regex: ''}}}"),
            Error(
                "spec.http[0].match[0].queryParams.q",
                "\"queryParams\": regex string match should not be empty",
            ),
        ),
        (
            "empty regex match in scheme",
            &redirect("{scheme: {regex: ''}}"),
            Error("spec.http[0].match[0].scheme", "\"scheme\": regex string match should not be empty"),
        ),
        (
            "empty prefix match in authority",
            &redirect("{authority: {prefix: ''}}"),
            Error(
                "spec.http[0].match[0].authority",
                "\"authority\": prefix string match should not be empty",
            ),
        ),
        (
            "two match types",
            &redirect("{uri: {exact: /a, prefix: /b}}"),
            Error("spec.http[0].match[0].uri", "only one of exact, prefix or regex may be set"),
        ),
        (
            "bad port",
            &redirect("{port: 70000}"),
            Error("spec.http[0].match[0].port", "port number 70000 must be in the range 1..65535"),
        ),
        (
            "bad source labels",
            &redirect("{sourceLabels: {'@app': a}}"),
            Error("spec.http[0].match[0].sourceLabels", "invalid tag key"),
        ),
        (
            "bad match gateway",
            &redirect("{gateways: ['ns/b@d']}"),
            Error("spec.http[0].match[0].gateways[0]", "invalid value for gateway name: \"b@d\""),
        ),
        (
            "bad source namespace",
            &redirect("{sourceNamespace: Foo_bar}"),
            Error("spec.http[0].match[0].sourceNamespace", "sourceNamespace match Foo_bar is invalid"),
        ),
    ]);
}

#[test]
fn cors_policy_cases_from_istio() {
    let cors = |c: &str| routed(&format!("corsPolicy: {c}"));
    check_all(&[
        (
            "valid",
            &cors(
                "{allowMethods: [GET, POST], allowHeaders: [header1, header2], exposeHeaders: [header3], maxAge: 2s}",
            ),
            Valid,
        ),
        (
            "bad method",
            &cors("{allowMethods: [GET, PUTT]}"),
            Error("spec.http[0].corsPolicy.allowMethods[1]", "\"PUTT\" is not a supported HTTP method"),
        ),
        (
            "bad header",
            &cors("{exposeHeaders: ['']}"),
            Error("spec.http[0].corsPolicy.exposeHeaders[0]", "header name cannot be empty"),
        ),
        (
            "bad max age",
            &cors("{maxAge: 2.000000042s}"),
            Error("spec.http[0].corsPolicy.maxAge", "max_age duration is accurate only to seconds precision"),
        ),
        (
            "empty allow origins",
            &cors("{allowOrigins: [{exact: ''}, {prefix: ''}, {regex: ''}]}"),
            Error(
                "spec.http[0].corsPolicy.allowOrigins[0]",
                "'' is not a valid match type for CORS allow origins",
            ),
        ),
        (
            "non-empty allow origins",
            &cors("{allowOrigins: [{exact: exact}, {prefix: prefix}, {regex: regex}]}"),
            Valid,
        ),
        (
            "bad origin regex",
            &cors("{allowOrigins: [{regex: '['}]}"),
            Error(
                "spec.http[0].corsPolicy.allowOrigins[0]",
                "\"corsPolicy.allowOrigins\": error parsing regexp",
            ),
        ),
    ]);
}

#[test]
fn fault_injection_cases_from_istio() {
    let fault = |f: &str| routed(&format!("fault: {f}"));
    let abort = "spec.http[0].fault.abort";
    let delay = "spec.http[0].fault.delay";
    check_all(&[
        (
            "empty fault",
            &fault("{}"),
            Error("spec.http[0].fault", "HTTP fault injection must have an abort and/or a delay"),
        ),
        ("valid abort", &fault("{abort: {percentage: {value: 20}, httpStatus: 200}}"), Valid),
        ("valid default abort", &fault("{abort: {httpStatus: 200}}"), Valid),
        (
            "invalid http status",
            &fault("{abort: {percentage: {value: 20}, httpStatus: 9000}}"),
            Error("spec.http[0].fault.abort.httpStatus", "HTTP status 9000 is not in range 200-599"),
        ),
        (
            "invalid low http status",
            &fault("{abort: {httpStatus: 100}}"),
            Error("spec.http[0].fault.abort.httpStatus", "HTTP status 100"),
        ),
        ("valid percentage", &fault("{abort: {percentage: {value: 0.001}, httpStatus: 200}}"), Valid),
        (
            "invalid fractional percent",
            &fault("{abort: {percentage: {value: -10.0}, httpStatus: 200}}"),
            Error(
                "spec.http[0].fault.abort.percentage.value",
                "percentage -10 is neither 0.0, nor in range [0.0001, 100.0]",
            ),
        ),
        ("grpc: valid", &fault("{abort: {percentage: {value: 20}, grpcStatus: DEADLINE_EXCEEDED}}"), Valid),
        ("grpc: valid default percentage", &fault("{abort: {grpcStatus: DEADLINE_EXCEEDED}}"), Valid),
        (
            "grpc: invalid status",
            &fault("{abort: {grpcStatus: BAD_STATUS}}"),
            Error("spec.http[0].fault.abort.grpcStatus", "gRPC status \"BAD_STATUS\" is not supported."),
        ),
        (
            "grpc: valid percentage",
            &fault("{abort: {percentage: {value: 0.001}, grpcStatus: INTERNAL}}"),
            Valid,
        ),
        (
            "http2 error",
            &fault("{abort: {http2Error: CANCEL}}"),
            Error("spec.http[0].fault.abort.http2Error", "HTTP/2 abort fault injection not supported yet"),
        ),
        (
            "abort without error type",
            &fault("{abort: {percentage: {value: 1}}}"),
            Warning(abort, "abort configured, but error type not set"),
        ),
        (
            "abort with two error types",
            &fault("{abort: {httpStatus: 500, grpcStatus: INTERNAL}}"),
            Error(abort, "only one of httpStatus, grpcStatus or http2Error may be set"),
        ),
        ("valid fixed delay", &fault("{delay: {percentage: {value: 20}, fixedDelay: 3s}}"), Valid),
        ("valid default delay", &fault("{delay: {fixedDelay: 3s}}"), Valid),
        (
            "invalid delay percent",
            &fault("{delay: {percentage: {value: 101}, fixedDelay: 3s}}"),
            Error(
                "spec.http[0].fault.delay.percentage.value",
                "percentage 101 is neither 0.0, nor in range [0.0001, 100.0]",
            ),
        ),
        (
            "invalid delay",
            &fault("{delay: {percentage: {value: 20}, fixedDelay: 3.000000042s}}"),
            Error("spec.http[0].fault.delay.fixedDelay", "only durations to ms precision are supported"),
        ),
        (
            "valid fractional delay percentage",
            &fault("{delay: {percentage: {value: 0.001}, fixedDelay: 3s}}"),
            Valid,
        ),
        (
            "exponential delay",
            &fault("{delay: {exponentialDelay: 1s}}"),
            Error("spec.http[0].fault.delay.exponentialDelay", "exponentialDelay not supported yet"),
        ),
        (
            "two delay types",
            &fault("{delay: {fixedDelay: 1s, exponentialDelay: 1s}}"),
            Error(delay, "only one of fixedDelay or exponentialDelay may be set"),
        ),
    ]);
}

#[test]
fn retry_cases_from_istio() {
    let retries = |r: &str| routed(&format!("retries: {r}"));
    let at = "spec.http[0].retries";
    check_all(&[
        ("valid", &retries("{attempts: 10, perTryTimeout: 2s, retryOn: '5xx,gateway-error'}"), Valid),
        ("disable retries", &retries("{attempts: 0}"), Valid),
        (
            "retry policy configured but attempts set to zero",
            &retries("{attempts: 0, perTryTimeout: 2s, retryOn: '5xx,gateway-error'}"),
            Error(at, "http retry policy configured when attempts are set to 0 (disabled)"),
        ),
        ("valid default", &retries("{attempts: 10}"), Valid),
        (
            "valid http status retryOn",
            &retries("{attempts: 10, perTryTimeout: 2s, retryOn: '503,connect-failure'}"),
            Valid,
        ),
        (
            "invalid attempts",
            &retries("{attempts: -1, perTryTimeout: 2s}"),
            Error("spec.http[0].retries.attempts", "attempts cannot be negative"),
        ),
        (
            "invalid timeout",
            &retries("{attempts: 10, perTryTimeout: 2.000000001s}"),
            Error("spec.http[0].retries.perTryTimeout", "only durations to ms precision are supported"),
        ),
        (
            "timeout too small",
            &retries("{attempts: 10, perTryTimeout: 0.000000999s}"),
            Error("spec.http[0].retries.perTryTimeout", "duration must be greater than 1ms"),
        ),
        (
            "invalid backoff",
            &retries("{attempts: 10, backoff: 0.000000999s}"),
            Error("spec.http[0].retries.backoff", "duration must be greater than 1ms"),
        ),
        (
            "invalid policy retryOn",
            &retries("{attempts: 10, perTryTimeout: 2s, retryOn: '5xx,invalid policy'}"),
            Error("spec.http[0].retries.retryOn", "\"invalid policy\" is not a valid retryOn policy"),
        ),
        (
            "invalid http status retryOn",
            &retries("{attempts: 10, perTryTimeout: 2s, retryOn: '600,connect-failure'}"),
            Error("spec.http[0].retries.retryOn", "\"600\" is not a valid retryOn policy"),
        ),
        (
            "retryRemoteLocalities configured but attempts set to zero",
            &retries("{attempts: 0, retryRemoteLocalities: false}"),
            Error(at, "http retry policy configured when attempts are set to 0 (disabled)"),
        ),
    ]);
}

#[test]
fn rewrite_cases_from_istio() {
    let rewrite = |r: &str| routed(&format!("rewrite: {r}"));
    let at = "spec.http[0].rewrite";
    check_all(&[
        ("uri and authority", &rewrite("{uri: /path/to/resource, authority: foobar.org}"), Valid),
        ("uri", &rewrite("{uri: /path/to/resource}"), Valid),
        ("authority", &rewrite("{authority: foobar.org}"), Valid),
        (
            "uriRegexRewrite",
            &rewrite("{uriRegexRewrite: {match: '^/service/([^/]+)(/.*)$', rewrite: '\\2/instance/\\1'}}"),
            Valid,
        ),
        (
            "uriRegexRewrite and authority",
            &rewrite(
                "{authority: foobar.org, uriRegexRewrite: {match: '^/service/([^/]+)(/.*)$', rewrite: '\\2/instance/\\1'}}",
            ),
            Valid,
        ),
        (
            "uriRegexRewrite and uri",
            &rewrite(
                "{uri: /path, uriRegexRewrite: {match: '^/service/([^/]+)(/.*)$', rewrite: '\\2/instance/\\1'}}",
            ),
            Error(at, "rewrite may only contain one of URI or UriRegexRewrite"),
        ),
        (
            "nothing",
            &rewrite("{}"),
            Error(at, "rewrite must specify at least one of URI, UriRegexRewrite, or authority"),
        ),
        (
            "uriRegexRewrite missing match",
            &rewrite("{uriRegexRewrite: {rewrite: '\\2/instance/\\1'}}"),
            Error(
                "spec.http[0].rewrite.uriRegexRewrite.match",
                "UriRegexRewrite requires both Rewrite and Match fields to be specified",
            ),
        ),
        (
            "uriRegexRewrite missing rewrite",
            &rewrite("{uriRegexRewrite: {match: '^/service/([^/]+)(/.*)$'}}"),
            Error(
                "spec.http[0].rewrite.uriRegexRewrite.rewrite",
                "UriRegexRewrite requires both Rewrite and Match fields to be specified",
            ),
        ),
        (
            "uriRegexRewrite invalid regex patterns",
            &rewrite("{uriRegexRewrite: {match: '[', rewrite: '['}}"),
            Error(
                "spec.http[0].rewrite.uriRegexRewrite.match",
                "\"HTTPRewrite.UriRegexRewrite.Match\": error parsing regexp: missing closing ]",
            ),
        ),
    ]);
}

#[test]
fn redirect_cases_from_istio() {
    let redirect = |r: &str| http(&format!("{{redirect: {r}}}"));
    let at = "spec.http[0].redirect";
    check_all(&[
        (
            "empty uri and authority",
            &redirect("{}"),
            Error(at, "redirect must specify URI, authority, scheme, or port"),
        ),
        (
            "too small redirect code",
            &redirect("{uri: t, redirectCode: 299}"),
            Error("spec.http[0].redirect.redirectCode", "299 is not a valid redirect code, must be 3xx"),
        ),
        (
            "too large redirect code",
            &redirect("{uri: t, redirectCode: 400}"),
            Error("spec.http[0].redirect.redirectCode", "400 is not a valid redirect code"),
        ),
        ("empty authority", &redirect("{uri: t}"), Valid),
        ("empty uri", &redirect("{authority: t}"), Valid),
        ("empty redirect code", &redirect("{uri: t, authority: t, redirectCode: 0}"), Valid),
        ("normal redirect", &redirect("{uri: t, authority: t, redirectCode: 308}"), Valid),
        ("prefix_rewrite alone", &redirect("{prefixRewrite: /bar}"), Valid),
        ("prefix_rewrite with authority", &redirect("{authority: foo.example.com, prefixRewrite: /}"), Valid),
        (
            "uri and prefix_rewrite",
            &redirect("{uri: /old, prefixRewrite: /new}"),
            Error(at, "redirect may only specify one of uri or prefix_rewrite"),
        ),
        ("port only", &redirect("{port: 8080}"), Valid),
        ("derived port only", &redirect("{derivePort: FROM_REQUEST_PORT}"), Valid),
        (
            "bad port",
            &redirect("{port: 70000}"),
            Error("spec.http[0].redirect.port", "port number 70000 must be in the range 1..65535"),
        ),
        (
            "port and derived port",
            &redirect("{port: 80, derivePort: FROM_REQUEST_PORT}"),
            Error(at, "only one of port or derivePort may be set"),
        ),
        ("scheme", &redirect("{scheme: https}"), Valid),
        (
            "bad scheme",
            &redirect("{scheme: ftp}"),
            Error("spec.http[0].redirect.scheme", "invalid redirect scheme, must be \"http\" or \"https\""),
        ),
    ]);
}

#[test]
fn direct_response_cases_from_istio() {
    let response = |r: &str| http(&format!("{{directResponse: {r}}}"));
    let big = |size: usize| response(&format!("{{status: 200, body: {{string: {}}}}}", "a".repeat(size)));
    check_all(&[
        ("status 200", &response("{status: 200}"), Valid),
        (
            "status 199",
            &response("{status: 199}"),
            Error("spec.http[0].directResponse.status", "HTTP status 199 is not in range 200-599"),
        ),
        (
            "status 601",
            &response("{status: 601}"),
            Error("spec.http[0].directResponse.status", "HTTP status 601"),
        ),
        (
            "no status",
            &response("{body: {string: a}}"),
            Error("spec.http[0].directResponse.status", "HTTP status 0"),
        ),
        ("with string body", &response("{status: 200, body: {string: hello}}"), Valid),
        ("with bytes body", &response("{status: 200, body: {bytes: aGVsbG8=}}"), Valid),
        (
            "with string body over 100kb",
            &big(101 * 1024),
            Warning(
                "spec.http[0].directResponse.body",
                "large direct_responses may impact control plane performance",
            ),
        ),
        (
            "with string body over 1mb",
            &big(2 * 1024 * 1024),
            Error(
                "spec.http[0].directResponse.body",
                "large direct_responses may impact control plane performance, must be less than 1MB",
            ),
        ),
        (
            "string and bytes",
            &response("{status: 200, body: {string: a, bytes: aGVsbG8=}}"),
            Error("spec.http[0].directResponse.body", "only one of string or bytes may be set"),
        ),
    ]);
}

#[test]
fn destination_cases_from_istio() {
    let dest = |d: &str| http(&format!("{{route: [{{destination: {d}}}]}}"));
    check_all(&[
        (
            "empty",
            &dest("{}"),
            Error("spec.http[0].route[0].destination.host", "empty domain name not allowed"),
        ),
        ("simple", &dest("{host: foo.bar}"), Valid),
        ("full", &dest("{host: foo.bar, subset: shiny, port: {number: 5000}}"), Valid),
        (
            "unnumbered-selector",
            &dest("{host: foo.bar, subset: shiny, port: {}}"),
            Error(
                "spec.http[0].route[0].destination.port.number",
                "port number 0 must be in the range 1..65535",
            ),
        ),
        (
            "bad subset",
            &dest("{host: foo.bar, subset: Not_Valid}"),
            Error("spec.http[0].route[0].destination.subset", "subset name is invalid: Not_Valid"),
        ),
    ]);
}

#[test]
fn route_destination_cases_from_istio() {
    let tcp = |routes: &str| format!("hosts: [foo.bar]\ntcp: [{{route: {routes}}}]");
    check_all(&[
        ("simple", &tcp("[{destination: {host: foo.baz}}]"), Valid),
        ("wildcard dash", &tcp("[{destination: {host: '*-foo.baz'}}]"), Valid),
        ("wildcard prefix", &tcp("[{destination: {host: '*foo.baz'}}]"), Valid),
        (
            "wildcard",
            &tcp("[{destination: {host: '*'}}]"),
            Error("spec.tcp[0].route[0].destination.host", "invalid destination host *"),
        ),
        (
            "bad wildcard",
            &tcp("[{destination: {host: 'foo.*'}}]"),
            Error("spec.tcp[0].route[0].destination.host", "invalid"),
        ),
        (
            "bad fqdn",
            &tcp("[{destination: {host: default/baz}}]"),
            Error("spec.tcp[0].route[0].destination.host", "invalid"),
        ),
        (
            "no destination",
            &tcp("[{}]"),
            Error("spec.tcp[0].route[0].destination", "destination is required"),
        ),
        (
            "weighted",
            &tcp(
                "[{destination: {host: foo.baz.south}, weight: 25}, {destination: {host: foo.baz.east}, weight: 75}]",
            ),
            Valid,
        ),
        (
            "weight < 0",
            &tcp(
                "[{destination: {host: foo.baz.south}, weight: 5}, {destination: {host: foo.baz.east}, weight: -1}]",
            ),
            Error("spec.tcp[0].route[1].weight", "weight -1 < 0"),
        ),
        (
            "total weight > 100",
            &tcp("[{destination: {host: a.b}, weight: 550}, {destination: {host: c.d}, weight: 500}]"),
            Valid,
        ),
        (
            "total weight = 100",
            &tcp("[{destination: {host: a.b}, weight: 100}, {destination: {host: c.d}, weight: 0}]"),
            Valid,
        ),
        ("weight = 0", &tcp("[{destination: {host: a.b}, weight: 0}]"), Valid),
        (
            "total weight = 0 with multi RouteDestination",
            &tcp("[{destination: {host: a.b}, weight: 0}, {destination: {host: c.d}, weight: 0}]"),
            Error("spec.tcp[0].route", "total destination weight = 0"),
        ),
        (
            "bad destination subnet",
            "hosts: [foo.bar]\ntcp: [{match: [{destinationSubnets: [1.1.1.1/48]}], route: [{destination: {host: a.b}}]}]",
            Error("spec.tcp[0].match[0].destinationSubnets[0]", "1.1.1.1/48 is not a valid CIDR block"),
        ),
        (
            "bad tcp port",
            "hosts: [foo.bar]\ntcp: [{match: [{port: 70000}], route: [{destination: {host: a.b}}]}]",
            Error("spec.tcp[0].match[0].port", "port number 70000 must be in the range 1..65535"),
        ),
        (
            "bad tls destination subnet",
            "hosts: [foo.bar]\ntls: [{match: [{sniHosts: [foo.bar], destinationSubnets: [a.b.c.d]}], route: [{destination: {host: a.b}}]}]",
            Error("spec.tls[0].match[0].destinationSubnets[0]", "a.b.c.d is not a valid IP"),
        ),
    ]);
}
