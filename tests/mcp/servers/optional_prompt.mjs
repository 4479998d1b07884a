// A server on the TypeScript SDK 1.9.0 (npm alias mcp-sdk-1-9), with a prompt whose
// arguments are all optional. Before SDK 1.32, McpServer checked a prompts/get
// request's "arguments" as sent against the prompt's schema, and refused a request
// without any ("Expected object, received undefined"); many published servers pin
// such a version.
import { McpServer } from "mcp-sdk-1-9/server/mcp.js";
import { StdioServerTransport } from "mcp-sdk-1-9/server/stdio.js";
// The SDK's own zod 3, which its McpServer reads schemas of.
import { z } from "../../../node_modules/mcp-sdk-1-9/node_modules/zod/index.js";

const server = new McpServer({ name: "optional-prompt", version: "1.0.0" });
server.prompt("wrapup", "Wrap up the day's work.", { tag: z.string().optional() }, ({ tag }) => ({
  messages: [
    { role: "user", content: { type: "text", text: tag ? `Wrap up and tag ${tag}.` : "Wrap up." } },
  ],
}));
await server.connect(new StdioServerTransport());
