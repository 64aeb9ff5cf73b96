//! The stdio wire in front of rmcp's service: one JSON-RPC message per line, and a reply
//! to every message that cannot be served.
//!
//! rmcp's own line transport drops unparsable lines silently (so a client waits for its
//! own timeout). This transport reads each line itself, bounded, and answers:
//!
//! - `-32700` Parse error, `id: null`: invalid UTF-8, invalid JSON (a lone surrogate,
//!   a number out of range such as `1e400`, nesting deeper than the parser allows) and
//!   a line longer than [`MAX_LINE_BYTES`];
//! - `-32602` Invalid params, with the request's id: `tools/call` without a `name` (a
//!   string), or whose `arguments` is present and not an object (`null` counts as
//!   absent);
//! - `-32600` Invalid request, with the request's id when it has one: well-formed JSON
//!   that is not a JSON-RPC message rmcp knows (a batch array, a request without a
//!   method, ...). A notification that rmcp does not know is dropped, as JSON-RPC says.
//!
//! Everything else is handed to rmcp unchanged. Replies written here and rmcp's own
//! messages share one writer, one whole line at a time.
//!
//! A tool's success is serialized once, to its JSON text ([`super::answer`]): the wire
//! writes that text as the text content and, once more as it is, as the
//! `structuredContent` ([`Answers`]).

use std::collections::VecDeque;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage, RequestId, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

/// Longest line (one message) read, in bytes; longer lines are answered with `-32700`
/// and skipped up to their newline without being buffered. Four times the 4 MiB
/// argument cap, room for JSON escaping.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC error codes used on the wire.
pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const INVALID_PARAMS: i64 = -32602;

type Writer = Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// A server transport over any byte stream pair (stdin/stdout in `cairn serve`).
pub struct LineTransport {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    writer: Writer,
    answers: Answers,
}

impl LineTransport {
    /// Start reading `read` on a task of the current runtime; replies go to `write`.
    pub fn new<R, W>(read: R, write: W) -> LineTransport
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let writer: Writer = Arc::new(Mutex::new(Box::new(write)));
        let answers = Answers::default();
        let (tx, incoming) = mpsc::channel(32);
        tokio::spawn(read_loop(
            BufReader::new(read),
            tx,
            writer.clone(),
            answers.clone(),
        ));
        LineTransport {
            incoming,
            writer,
            answers,
        }
    }
}

/// The `tools/call` requests of one wire whose success carries no `structuredContent`
/// but its JSON text ([`super::answer::Wire::Text`]): the wire writes that text once more,
/// as it is, as the `structuredContent`. Each `tools/call` request reaches the server
/// with the wire's `Answers` in its extensions; the server marks the request when it
/// answers so.
#[derive(Clone, Default)]
pub(crate) struct Answers(Arc<std::sync::Mutex<VecDeque<RequestId>>>);

impl Answers {
    /// Marks kept at most. A mark is taken when its answer is written, at once; one
    /// whose answer never is (rmcp drops the answer to a request cancelled meanwhile)
    /// is forgotten after this many more.
    const KEPT: usize = 1024;

    /// The server answers request `id` with its JSON text only.
    pub(crate) fn mark(&self, id: RequestId) {
        let mut marks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if marks.len() == Answers::KEPT {
            marks.pop_front();
        }
        marks.push_back(id);
    }

    /// Whether request `id` was marked (the mark is taken).
    pub(crate) fn take(&self, id: &RequestId) -> bool {
        let mut marks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match marks.iter().position(|m| m == id) {
            Some(at) => marks.remove(at).is_some(),
            None => false,
        }
    }
}

/// The line of `item`: a marked answer ([`Answers`]) gets its text content, the answer's
/// JSON text, as its `structuredContent` too.
fn encode(item: &TxJsonRpcMessage<RoleServer>, answers: &Answers) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(item)?;
    if let JsonRpcMessage::Response(response) = item
        && let ServerResult::CallToolResult(result) = &response.result
        && answers.take(&response.id)
        && result.structured_content.is_none()
        && let [content] = result.content.as_slice()
        && let Some(answer) = content.as_text()
    {
        splice(&mut line, &answer.text);
    }
    Ok(line)
}

/// Write `answer`, a tool's JSON text, as the `structuredContent` of `message`, the
/// serialized JSON-RPC response whose result carries that text as its only content:
/// `{"jsonrpc":"2.0","id":…,"result":{…}}`, where the result is the message's last
/// member and the answer goes last in it. Whether it was written (not when `message`
/// does not end so).
pub(crate) fn splice(message: &mut Vec<u8>, answer: &str) -> bool {
    if !message.ends_with(b"}}") {
        return false;
    }
    message.truncate(message.len() - 2);
    message.reserve(answer.len() + 24);
    message.extend_from_slice(b",\"structuredContent\":");
    message.extend_from_slice(answer.as_bytes());
    message.extend_from_slice(b"}}");
    true
}

/// Whether `message`, a serialized JSON-RPC message, is a response with a result, as
/// rmcp writes one: `{"jsonrpc":"2.0","id":…,"result":…`. (A notification, or a request
/// the server sends, has a `method` after its version or id.)
pub(crate) fn is_result(message: &[u8]) -> bool {
    let Some(rest) = message.strip_prefix(br#"{"jsonrpc":"2.0","id":"#) else {
        return false;
    };
    let end = match rest.first() {
        // A string id: up to its closing quote, escaped characters skipped.
        Some(b'"') => {
            let mut i = 1;
            loop {
                match rest.get(i) {
                    Some(b'\\') => i += 2,
                    Some(b'"') => break i + 1,
                    Some(_) => i += 1,
                    None => return false,
                }
            }
        }
        _ => rest
            .iter()
            .position(|b| !(b.is_ascii_digit() || *b == b'-'))
            .unwrap_or(rest.len()),
    };
    rest[end..].starts_with(br#","result":"#)
}

/// Write `line` and its newline.
async fn write_line(writer: &Writer, mut line: Vec<u8>) -> std::io::Result<()> {
    line.push(b'\n');
    let mut w = writer.lock().await;
    w.write_all(&line).await?;
    w.flush().await
}

/// Write the JSON-RPC error `reply`.
async fn write_reply(writer: &Writer, reply: &Value) -> std::io::Result<()> {
    write_line(writer, serde_json::to_vec(reply)?).await
}

fn error_reply(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// What one line turned out to be.
#[derive(Debug)]
pub(crate) enum Line {
    /// A message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Send this JSON-RPC error reply.
    Reply(Value),
    /// Nothing to do (an empty line, an unknown notification).
    Skip,
}

/// Classify one line (without its newline).
pub(crate) fn classify(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    // Nearly every line is a message of a method rmcp knows: read it so, once. Anything
    // else (a custom method: a `tools/call` whose params do not parse falls back to one)
    // is judged below, as JSON first.
    if let Ok(msg) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line)
        && !is_custom(&msg)
    {
        return Line::Message(Box::new(msg));
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            let why = match std::str::from_utf8(line) {
                Err(_) => "the message is not valid UTF-8".to_string(),
                Ok(_) => format!("the message is not valid JSON: {e}"),
            };
            return Line::Reply(error_reply(
                Value::Null,
                PARSE_ERROR,
                format!("Parse error: {why}"),
            ));
        }
    };
    let id = value.get("id").cloned();
    let method = value.get("method").and_then(Value::as_str);
    let has_method = method.is_some();
    if method == Some("tools/call") && id.is_some() {
        let params = value.get("params");
        if !params
            .and_then(|p| p.get("name"))
            .is_some_and(Value::is_string)
        {
            return Line::Reply(error_reply(
                id.unwrap_or(Value::Null),
                INVALID_PARAMS,
                "Invalid params: tools/call needs `name`, the tool's name as a string \
                 (tools/list names them)"
                    .to_string(),
            ));
        }
        if let Some(args) = params.and_then(|p| p.get("arguments"))
            && !args.is_object()
            && !args.is_null()
        {
            return Line::Reply(error_reply(
                id.unwrap_or(Value::Null),
                INVALID_PARAMS,
                "Invalid params: tools/call arguments must be a JSON object".to_string(),
            ));
        }
    }
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(msg) => Line::Message(Box::new(msg)),
        // A notification gets no reply, whatever it is.
        Err(_) if has_method && id.is_none() => Line::Skip,
        Err(e) => Line::Reply(error_reply(
            id.filter(|i| i.is_string() || i.is_number())
                .unwrap_or(Value::Null),
            INVALID_REQUEST,
            format!("Invalid request: not a JSON-RPC message this server accepts: {e}"),
        )),
    }
}

/// Whether rmcp read `msg` as a request or notification of a method it does not know.
fn is_custom(msg: &RxJsonRpcMessage<RoleServer>) -> bool {
    match msg {
        JsonRpcMessage::Request(r) => matches!(r.request, ClientRequest::CustomRequest(_)),
        JsonRpcMessage::Notification(n) => {
            matches!(n.notification, ClientNotification::CustomNotification(_))
        }
        _ => false,
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut read: BufReader<R>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    writer: Writer,
    answers: Answers,
) {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        match read_bounded_line(&mut read, &mut buf).await {
            Ok(Some(true)) => {}
            Ok(Some(false)) => {
                tracing::warn!(max = MAX_LINE_BYTES, "over-long message line refused");
                let reply = error_reply(
                    Value::Null,
                    PARSE_ERROR,
                    format!("Parse error: the message is longer than {MAX_LINE_BYTES} bytes"),
                );
                if write_reply(&writer, &reply).await.is_err() {
                    return;
                }
                continue;
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "reading the MCP input failed");
                return;
            }
        }
        match classify(&buf) {
            Line::Message(mut msg) => {
                if let JsonRpcMessage::Request(request) = &mut *msg
                    && let ClientRequest::CallToolRequest(call) = &mut request.request
                {
                    call.extensions.insert(answers.clone());
                }
                if tx.send(*msg).await.is_err() {
                    return;
                }
            }
            Line::Reply(reply) => {
                tracing::info!(reply = %reply, "unservable message answered");
                if write_reply(&writer, &reply).await.is_err() {
                    return;
                }
            }
            Line::Skip => {}
        }
    }
}

/// Read one line into `buf` (without the newline). `Some(true)`: a line;
/// `Some(false)`: the line was longer than [`MAX_LINE_BYTES`] and was skipped;
/// `None`: end of input (a trailing line without newline is still delivered).
async fn read_bounded_line<R: AsyncRead + Unpin>(
    read: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut oversized = false;
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(if oversized {
                Some(false)
            } else if buf.is_empty() {
                None
            } else {
                Some(true)
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        if !oversized {
            let end = newline.unwrap_or(available.len());
            if buf.len() + end > MAX_LINE_BYTES {
                oversized = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&available[..end]);
            }
        }
        read.consume(take);
        if newline.is_some() {
            return Ok(Some(!oversized));
        }
    }
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let answers = self.answers.clone();
        async move { write_line(&writer, encode(&item, &answers)?).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &[u8]) -> Value {
        match classify(line) {
            Line::Reply(v) => v,
            other => panic!("expected a reply for {:?}, got {other:?}", line),
        }
    }

    #[test]
    fn garbage_gets_a_parse_error_with_a_null_id() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let cases: Vec<Vec<u8>> = vec![
            b"{not json".to_vec(),
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xff\xfe\"}".to_vec(),
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"\ud800"}}"#.to_vec(),
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e400}}"#.to_vec(),
            deep.into_bytes(),
        ];
        for c in cases {
            let r = reply(&c);
            assert_eq!(r["error"]["code"], PARSE_ERROR, "{r}");
            assert_eq!(r["id"], Value::Null);
            assert_eq!(r["jsonrpc"], "2.0");
        }
    }

    #[test]
    fn non_object_arguments_get_invalid_params_with_the_id() {
        for args in ["[1,2]", "\"x\"", "3", "true"] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"server_ping","arguments":{args}}}}}"#
            );
            let r = reply(line.as_bytes());
            assert_eq!(r["error"]["code"], INVALID_PARAMS, "{r}");
            assert_eq!(r["id"], 7);
        }
        let ok = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"server_ping","arguments":{}}}"#;
        assert!(matches!(classify(ok), Line::Message(_)));
    }

    #[test]
    fn a_call_without_a_tool_name_gets_invalid_params_with_the_id() {
        for params in ["{}", r#"{"arguments":{}}"#, r#"{"name":7}"#, "null"] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{params}}}"#);
            let r = reply(line.as_bytes());
            assert_eq!(r["error"]["code"], INVALID_PARAMS, "{params}: {r}");
            assert_eq!(r["id"], "n");
            assert!(r["error"]["message"].as_str().unwrap().contains("name"));
        }
        let r = reply(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#);
        assert_eq!(r["error"]["code"], INVALID_PARAMS, "{r}");
    }

    #[test]
    fn well_formed_non_messages_are_invalid_requests_and_notifications_are_dropped() {
        let r = reply(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
        assert_eq!(r["error"]["code"], INVALID_REQUEST);
        let r = reply(br#"{"jsonrpc":"2.0","id":"a","nope":1}"#);
        assert_eq!(r["error"]["code"], INVALID_REQUEST);
        assert_eq!(r["id"], "a");
        // A notification never gets a reply (rmcp takes unknown ones as custom).
        assert!(!matches!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#),
            Line::Reply(_)
        ));
        assert_eq!(
            reply(br#"{"jsonrpc":"2.0","method":7}"#)["error"]["code"],
            INVALID_REQUEST
        );
        assert!(matches!(classify(b"  \r"), Line::Skip));
    }

    /// A success answered by its text only, as `cairn serve`'s server answers this wire.
    fn response(id: i64, text: &str, structured: Option<Value>) -> TxJsonRpcMessage<RoleServer> {
        let mut result =
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)]);
        result.structured_content = structured;
        JsonRpcMessage::response(ServerResult::CallToolResult(result), RequestId::Number(id))
    }

    #[test]
    fn a_marked_answer_goes_out_as_rmcp_writes_it_with_its_text_as_structured_content() {
        let answer = json!({"results": [{"title": "a \"b\" › c\n", "score": 0.5}], "count": 1});
        let text = answer.to_string();
        let answers = Answers::default();
        answers.mark(RequestId::Number(7));
        let line = encode(&response(7, &text, None), &answers).unwrap();
        let want = serde_json::to_vec(&response(7, &text, Some(answer.clone()))).unwrap();
        let line: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(line, serde_json::from_slice::<Value>(&want).unwrap());
        assert_eq!(line["result"]["structuredContent"], answer);
        // The mark is taken: the same id again, and an unmarked id, go out as they are.
        for id in [7, 8] {
            let plain = encode(&response(id, &text, None), &answers).unwrap();
            assert_eq!(
                plain,
                serde_json::to_vec(&response(id, &text, None)).unwrap()
            );
        }
        // A result that carries its own structuredContent keeps it.
        answers.mark(RequestId::Number(9));
        let own = response(9, "{}", Some(json!({})));
        assert_eq!(
            encode(&own, &answers).unwrap(),
            serde_json::to_vec(&own).unwrap()
        );
    }

    #[test]
    fn a_result_is_told_from_notifications_and_requests() {
        for yes in [
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":-1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b,\"result\":","result":{}}"#,
        ] {
            assert!(is_result(yes.as_bytes()), "{yes}");
        }
        for no in [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"roots/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"x\",\"result\":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"no"}}"#,
            "",
        ] {
            assert!(!is_result(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn marks_are_bounded() {
        let answers = Answers::default();
        for id in 0..=Answers::KEPT as i64 {
            answers.mark(RequestId::Number(id));
        }
        assert!(!answers.take(&RequestId::Number(0)));
        assert!(answers.take(&RequestId::Number(Answers::KEPT as i64)));
    }

    #[tokio::test]
    async fn an_over_long_line_is_skipped_without_buffering_it() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\n{\"a\":1}\n");
        let mut r = BufReader::new(&input[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_bounded_line(&mut r, &mut buf).await.unwrap(),
            Some(false)
        );
        assert!(buf.is_empty());
        assert_eq!(
            read_bounded_line(&mut r, &mut buf).await.unwrap(),
            Some(true)
        );
        assert_eq!(buf, b"{\"a\":1}");
        assert_eq!(read_bounded_line(&mut r, &mut buf).await.unwrap(), None);
    }
}
