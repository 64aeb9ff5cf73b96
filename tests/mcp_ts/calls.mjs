// The call loop of the TypeScript drivers (drive.mjs over stdio, http_drive.mjs over
// Streamable HTTP): each call in order through `client.callTool`, and what came back:
// [{"tool", "threw", "is_error", "structured", "envelope"}...]. "threw" is the SDK's
// exception message (null when the call reached the caller); "envelope" is the error
// envelope parsed from a failed call's text content.
export async function runCalls(client, calls) {
  const seen = [];
  for (const call of calls) {
    const entry = { tool: call.tool, threw: null, is_error: null, structured: null, envelope: null };
    try {
      const r = await client.callTool({ name: call.tool, arguments: call.arguments ?? {} });
      entry.is_error = r.isError === true;
      entry.structured = r.structuredContent ?? null;
      if (entry.is_error) {
        const text = (r.content ?? []).map((c) => c.text ?? "").join("");
        try {
          entry.envelope = JSON.parse(text);
        } catch {
          entry.envelope = { unparsable_text: text };
        }
      }
    } catch (e) {
      entry.threw = String(e?.message ?? e);
    }
    seen.push(entry);
  }
  return seen;
}
