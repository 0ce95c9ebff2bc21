//! Tests against a real peer process (Envoy); `scripts/test.sh --pure` skips them.

mod envoy_edsz;
