//! Chain ids: the names of unpacked layer snapshots (OCI image-spec: ChainID(L0) = DiffID(L0),
//! ChainID(Ln) = sha256(ChainID(Ln-1) + " " + DiffID(Ln))).

use arena_image::Digest;

pub fn chain_ids(diff_ids: &[Digest]) -> Vec<Digest> {
    let mut out: Vec<Digest> = Vec::with_capacity(diff_ids.len());
    for d in diff_ids {
        let next = match out.last() {
            None => d.clone(),
            Some(prev) => Digest::of_bytes(format!("{prev} {d}").as_bytes()),
        };
        out.push(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_ids_follow_the_image_spec() {
        let a = Digest::of_bytes(b"a");
        let b = Digest::of_bytes(b"b");
        let ids = chain_ids(&[a.clone(), b.clone()]);
        assert_eq!(ids[0], a);
        assert_eq!(ids[1], Digest::of_bytes(format!("{a} {b}").as_bytes()));
        assert!(chain_ids(&[]).is_empty());
    }
}
