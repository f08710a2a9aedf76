use super::*;

#[test]
fn byte_edits_apply_anywhere_and_in_order() {
    let b = b"abc";
    let e = [
        ByteEdit::Insert {
            at: 1,
            text: b"XY".to_vec(),
        },
        ByteEdit::Delete { at: 0, len: 1 },
        ByteEdit::Set { at: 7, byte: b'!' },
    ];
    // "aXYbc" → "XYbc" → position 7 mod 4 = 3: "XYb!"
    assert_eq!(apply_bytes(b, &e), b"XYb!");
    assert_eq!(apply_bytes(b, &[ByteEdit::Truncate { at: 2 }]), b"ab");
    assert_eq!(
        apply_bytes(b, &[ByteEdit::Duplicate { at: 1, len: 5 }]),
        b"abcbc"
    );
    assert_eq!(apply_bytes(b"", &[ByteEdit::Set { at: 3, byte: 1 }]), b"");
}

#[test]
fn document_edits_reach_every_node() {
    let doc: Value = serde_json::json!({"a": [1, 2], "b": {"c": "x"}});
    // Pre-order: 0 root, 1 a, 2 a[0], 3 a[1], 4 b, 5 b.c
    let mut d = doc.clone();
    apply_doc(
        &mut d,
        &[DocEdit::Replace {
            node: 5,
            with: Leaf::Int(-1),
        }],
    );
    assert_eq!(d, serde_json::json!({"a": [1, 2], "b": {"c": -1}}));
    let mut d = doc.clone();
    apply_doc(&mut d, &[DocEdit::Remove { node: 2 }]);
    assert_eq!(d, serde_json::json!({"a": [2], "b": {"c": "x"}}));
    let mut d = doc.clone();
    apply_doc(&mut d, &[DocEdit::Remove { node: 4 }]);
    assert_eq!(d, serde_json::json!({"a": [1, 2]}));
    let mut d = doc.clone();
    apply_doc(&mut d, &[DocEdit::Repeat { node: 1, times: 2 }]);
    assert_eq!(d, serde_json::json!({"a": [1, 2, 2, 2], "b": {"c": "x"}}));
    let mut d = doc.clone();
    apply_doc(
        &mut d,
        &[DocEdit::ReplaceString {
            nth: 3,
            with: "..".into(),
        }],
    );
    assert_eq!(
        d,
        serde_json::json!({"a": [1, 2], "b": {"c": ".."}}),
        "the only string, 3 mod 1"
    );
    let mut d = doc.clone();
    apply_doc(
        &mut d,
        &[DocEdit::Replace {
            node: 6,
            with: Leaf::Deep(2),
        }],
    );
    assert_eq!(
        d,
        serde_json::json!([[1]]),
        "node 6 is the root again (modulo 6)"
    );
}

#[test]
fn formats_read_and_write_their_own_documents() {
    let t = Format::Toml.read("a = 1\n[b]\nc = \"x\"\n").unwrap();
    assert_eq!(t, serde_json::json!({"a": 1, "b": {"c": "x"}}));
    assert!(Format::Toml
        .write(&serde_json::json!({"a": null}))
        .is_none());
    let y = Format::Yaml.read("a: [1, 2]\n").unwrap();
    assert_eq!(
        Format::Yaml.read(&Format::Yaml.write(&y).unwrap()).unwrap(),
        y
    );
    assert!(Format::Json.read("{").is_none());
}
