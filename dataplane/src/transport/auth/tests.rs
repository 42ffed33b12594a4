//! The handshake's messages without sockets: who authenticates, who is refused, and why.

use super::*;

fn secret(b: u8) -> ClusterSecret {
    ClusterSecret::new(vec![b; 32]).unwrap()
}

fn grant() -> Welcome {
    Welcome {
        data_credit_bytes: 1 << 20,
        control_credit_bytes: 1 << 18,
        frame_bytes_max: 1 << 16,
    }
}

/// A whole exchange; the error of the first side that fails.
fn run(
    client: &ClusterSecret,
    server: &ClusterSecret,
    c_cluster: u64,
    s_cluster: u64,
) -> Result<Welcome, AuthError> {
    let (hello, cs) = client_hello(c_cluster, 1)?;
    let (challenge, ss) = server_challenge(s_cluster, 2, &hello, |id| id == 1)?;
    let (response, ca) = client_respond(client, &cs, Some(2), &challenge)?;
    assert_eq!(ca.server_id(), 2);
    let welcome = server_verify(server, &ss, &response, grant())?;
    assert_eq!(ss.client_id(), 1);
    client_welcome(client, &ca, &welcome)
}

#[test]
fn the_same_secret_authenticates() {
    assert_eq!(run(&secret(1), &secret(1), 5, 5).unwrap(), grant());
}

#[test]
fn a_wrong_secret_fails_at_the_server_before_it_proves_anything() {
    assert!(matches!(
        run(&secret(1), &secret(2), 5, 5),
        Err(AuthError::BadProof)
    ));
}

#[test]
fn a_server_without_the_secret_fails_at_the_client() {
    let (hello, cs) = client_hello(5, 1).unwrap();
    let (challenge, ss) = server_challenge(5, 2, &hello, |_| true).unwrap();
    let (_, ca) = client_respond(&secret(1), &cs, None, &challenge).unwrap();
    // An impostor cannot make a Welcome: it does not hold the secret (here: another one).
    let (resp, _) = client_respond(&secret(2), &cs, None, &challenge).unwrap();
    let forged = server_verify(&secret(2), &ss, &resp, grant()).unwrap();
    assert!(matches!(
        client_welcome(&secret(1), &ca, &forged),
        Err(AuthError::BadProof)
    ));
}

#[test]
fn the_challenge_carries_no_proof() {
    // Everything a stranger gets before it proved anything: the challenge. It is the same
    // whatever the secret is (it is computed without it), so it is no guessing oracle.
    let (hello, _) = client_hello(5, 1).unwrap();
    let (challenge, _) = server_challenge(5, 2, &hello, |_| true).unwrap();
    assert_eq!(challenge.len(), HEAD_BYTES + 8 + NONCE_BYTES);
}

#[test]
fn another_cluster_fails() {
    assert!(run(&secret(1), &secret(1), 5, 6).is_err());
    assert!(run(&secret(1), &secret(1), 5, 5 | (1 << 40)).is_err());
}

#[test]
fn short_secrets_and_garbage_are_refused() {
    assert!(ClusterSecret::new(vec![0; 8]).is_err());
    assert!(server_challenge(5, 2, &[0xAB; HELLO_BYTES], |_| true).is_err());
    assert!(format!("{:?}", secret(7)).contains("32 bytes"));
}

#[test]
fn a_replayed_response_fails_against_a_fresh_challenge() {
    let s = secret(3);
    let (hello, cs) = client_hello(5, 1).unwrap();
    let (ch1, _ss1) = server_challenge(5, 2, &hello, |_| true).unwrap();
    let (resp1, _) = client_respond(&s, &cs, None, &ch1).unwrap();
    let (_ch2, ss2) = server_challenge(5, 2, &hello, |_| true).unwrap();
    assert!(server_verify(&s, &ss2, &resp1, grant()).is_err());
}

#[test]
fn another_version_is_refused_naming_both() {
    let (mut hello, _) = client_hello(5, 1).unwrap();
    hello[4] = 1;
    let e = server_challenge(5, 2, &hello, |_| true).err().unwrap();
    assert!(matches!(
        e,
        AuthError::Version {
            theirs: 1,
            ours: HANDSHAKE_VERSION
        }
    ));
    assert!(e.to_string().contains("version 1"), "{e}");
    // The server answers in its own version; the client names it.
    let mut r = refusal(Refusal::for_error(&e).unwrap());
    r[4] = 3;
    let e = read_refusal(&r);
    assert!(matches!(e, AuthError::Version { theirs: 3, .. }), "{e}");
}

#[test]
fn a_refusal_says_why() {
    let e = read_refusal(&refusal(Refusal::Proof));
    assert!(e.to_string().contains("secret"), "{e}");
    assert!(matches!(
        read_refusal(&[0; REFUSAL_BYTES]),
        AuthError::Malformed
    ));
    assert!(matches!(server_message_bytes(T_REFUSAL), Ok(REFUSAL_BYTES)));
    assert!(server_message_bytes(T_HELLO).is_err());
}

#[test]
fn an_id_in_use_is_refused_as_such() {
    let e = AuthError::InUse(3);
    assert!(
        e.to_string().contains("peer 3 already has a connection"),
        "{e}"
    );
    let told = read_refusal(&refusal(Refusal::for_error(&e).unwrap()));
    assert!(matches!(told, AuthError::Refused(Refusal::InUse)), "{told}");
    assert!(told.to_string().contains("process under our id"), "{told}");
}

proptest::proptest! {
    #[test]
    fn random_bytes_never_panic_the_handshake(
        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128),
        head_ok in proptest::prelude::any::<bool>(),
    ) {
        let mut data = data;
        // Half the cases start with a valid magic and version, to reach past the head.
        if head_ok && data.len() >= HEAD_BYTES {
            data[..4].copy_from_slice(&HANDSHAKE_MAGIC.to_le_bytes());
            data[4] = HANDSHAKE_VERSION;
        }
        let s = secret(7);
        let _ = read_head(&data);
        let _ = read_refusal(&data);
        let _ = server_challenge(5, 2, &data, |_| true);
        let (hello, client) = client_hello(5, 1).unwrap();
        let _ = client_respond(&s, &client, None, &data);
        let (challenge, server) = server_challenge(5, 2, &hello, |_| true).unwrap();
        proptest::prop_assert!(server_verify(&s, &server, &data, grant()).is_err());
        let (_, waiting) = client_respond(&s, &client, None, &challenge).unwrap();
        proptest::prop_assert!(client_welcome(&s, &waiting, &data).is_err());
    }
}
