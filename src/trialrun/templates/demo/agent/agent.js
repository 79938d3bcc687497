// Demo agent for trialrun: triages a support ticket with one search_docs tool call.
// It speaks the trialrun/RunLedger JSONL protocol: protocol messages on stdout, logs on stderr.
const readline = require("readline");

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

const rl = readline.createInterface({ input: process.stdin });
let finished = false;
rl.on("line", (line) => {
  const message = JSON.parse(line);
  if (message.type === "task_start") {
    const ticket = message.input.ticket || "";
    console.error(`searching docs for ${JSON.stringify(ticket)}`);
    send({ type: "tool_call", name: "search_docs", call_id: "c1", args: { q: ticket } });
  } else if (message.type === "tool_result") {
    send({ type: "final_output", output: { category: "account", reply: "Reset password instructions sent." } });
    finished = true;
    rl.close();
  }
});
rl.on("close", () => process.exit(finished ? 0 : 1));
