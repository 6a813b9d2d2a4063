//! Reading requests off the wire: where a whole HTTP request ends, which DynamoDB operations
//! a stretch of bytes names (their `X-Amz-Target: DynamoDB_20120810.<Operation>` headers), and
//! which access key signed a request (its `Authorization` header).

const TARGET_PREFIX: &[u8] = b"DynamoDB_20120810.";

/// The length of the first whole HTTP request in `bytes` (head, and the body its
/// `Content-Length` announces), if it has all arrived.
pub(super) fn whole_request_len(bytes: &[u8]) -> Option<usize> {
    let head_end = find(bytes, b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&bytes[..head_end]);
    let body = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    (bytes.len() >= head_end + body).then_some(head_end + body)
}

/// Operation names whose target header is complete in `window` but was not in its first `overlap`
/// bytes (those were scanned, and their complete names counted, with the previous chunk).
pub(super) fn operations_in(window: &[u8], overlap: usize) -> Vec<String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = find(&window[from..], TARGET_PREFIX) {
        let start = from + at + TARGET_PREFIX.len();
        let len = window[start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        let end = start + len;
        // Only a complete name (followed by a delimiter) counts.
        if end < window.len() && len > 0 && end >= overlap {
            found.push(String::from_utf8_lossy(&window[start..end]).into_owned());
        }
        from = end.max(from + at + 1);
    }
    found
}

/// The access key id that signed `request` (a whole request, or at least its head): the
/// `<AKID>` of `Credential=<AKID>/…` in its `Authorization` header; `None` without one.
pub(super) fn access_key_id(request: &[u8]) -> Option<String> {
    let head_end = find(request, b"\r\n\r\n").unwrap_or(request.len());
    let head = String::from_utf8_lossy(&request[..head_end]);
    let (_, value) = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("authorization"))?;
    let (_, credential) = value.split_once("Credential=")?;
    let akid = credential.split('/').next()?.trim();
    (!akid.is_empty() && !akid.contains([',', ' '])).then(|| akid.to_owned())
}

pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_whole_once_its_body_has_arrived() {
        let head = b"POST / HTTP/1.1\r\ncontent-length: 2\r\nx-amz-target: DynamoDB_20120810.PutItem\r\n\r\n";
        assert_eq!(whole_request_len(&head[..head.len() - 1]), None, "head cut");
        assert_eq!(whole_request_len(head), None, "no body yet");
        let mut whole = head.to_vec();
        whole.extend_from_slice(b"{}");
        assert_eq!(whole_request_len(&whole), Some(whole.len()));
        let mut two = whole.clone();
        two.extend_from_slice(&whole);
        assert_eq!(
            whole_request_len(&two),
            Some(whole.len()),
            "the first of two"
        );
        let bare = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
        assert_eq!(whole_request_len(bare), Some(bare.len()), "no body");
    }

    #[test]
    fn reads_the_access_key_id_of_the_authorization_header() {
        let signed = b"POST / HTTP/1.1\r\nx-amz-target: DynamoDB_20120810.PutItem\r\n\
            authorization: AWS4-HMAC-SHA256 Credential=worker3/20260101/us-east-1/dynamodb/aws4_request, \
            SignedHeaders=host;x-amz-date, Signature=abc\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(access_key_id(signed).as_deref(), Some("worker3"));
        let upper = b"POST / HTTP/1.1\r\nAuthorization: AWS4-HMAC-SHA256 Credential=test/x/y, Signature=1\r\n\r\n";
        assert_eq!(access_key_id(upper).as_deref(), Some("test"));
        let unsigned =
            b"POST / HTTP/1.1\r\ncontent-length: 30\r\n\r\n{\"Authorization\":\"Credential=x/\"}";
        assert_eq!(
            access_key_id(unsigned),
            None,
            "only the head's header counts"
        );
        let other = b"POST / HTTP/1.1\r\nauthorization: Bearer token\r\n\r\n";
        assert_eq!(access_key_id(other), None, "no credential");
    }

    #[test]
    fn finds_complete_operation_names_once() {
        let req = b"POST / HTTP/1.1\r\nx-amz-target: DynamoDB_20120810.PutItem\r\n\r\n{}";
        assert_eq!(operations_in(req, 0), ["PutItem"]);
        // A name cut at the end of the window is left for the next read.
        assert!(operations_in(b"x-amz-target: DynamoDB_20120810.Put", 0).is_empty());
        // A name wholly inside the overlap was counted already.
        let n = req.len();
        assert!(operations_in(req, n).is_empty());
        // A name that ended exactly where the previous window ended is counted now.
        let cut = b"x-amz-target: DynamoDB_20120810.PutItem";
        let mut joined = cut.to_vec();
        joined.extend_from_slice(b"\r\n");
        assert!(operations_in(cut, 0).is_empty());
        assert_eq!(operations_in(&joined, cut.len()), ["PutItem"]);
    }
}
