//! Feeds arbitrary bytes to every decoder of the connect-time handshake (a stranger's first
//! bytes reach them): each must return an error or a value, never panic.
#![no_main]

use clasp_dataplane::transport::auth::{self, ClusterSecret};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let secret = ClusterSecret::new(vec![7u8; 32]).expect("a valid secret");
    let _ = auth::read_head(data);
    let _ = auth::read_refusal(data);
    let _ = auth::server_challenge(5, 2, data, |_| true);
    let (hello, client) = auth::client_hello(5, 1).expect("a nonce");
    let _ = auth::client_respond(&secret, &client, None, data);
    let (challenge, server) = auth::server_challenge(5, 2, &hello, |_| true).expect("our hello");
    let _ = auth::server_verify(&secret, &server, data, welcome());
    let (_, waiting) = auth::client_respond(&secret, &client, None, &challenge).expect("ours");
    let _ = auth::client_welcome(&secret, &waiting, data);
});

fn welcome() -> auth::Welcome {
    auth::Welcome {
        data_credit_bytes: 1,
        control_credit_bytes: 1,
        frame_bytes_max: 1,
    }
}
