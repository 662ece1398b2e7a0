// Node preload: add `Authorization: $MCP_CONFORMANCE_AUTH` to every HTTP request the conformance
// suite makes, because the suite has no header option (modelcontextprotocol/conformance#453;
// PROTOCOL.md section 3). It sends through three paths: global fetch() and undici.request(),
// both of which honour undici's global dispatcher, and node:http.request(), which is wrapped.
// A header the suite sets itself is kept. Loaded with NODE_OPTIONS="--import <this file>";
// UNDICI_PATH names the conformance install's own undici, so its dispatcher is the one it uses.
import http from "node:http";
import { pathToFileURL } from "node:url";

const auth = process.env.MCP_CONFORMANCE_AUTH;
if (!auth) throw new Error("inject-auth.mjs: MCP_CONFORMANCE_AUTH is not set");

const { Agent, setGlobalDispatcher } = await import(pathToFileURL(process.env.UNDICI_PATH).href);

const addAuth = (dispatch) => (options, handler) => {
  const headers = options.headers ?? {};
  const has = Array.isArray(headers)
    ? headers.some((v, i) => i % 2 === 0 && String(v).toLowerCase() === "authorization")
    : typeof headers.has === "function"
      ? headers.has("authorization")
      : Object.keys(headers).some((k) => k.toLowerCase() === "authorization");
  if (has) return dispatch(options, handler);
  const added = Array.isArray(headers)
    ? [...headers, "authorization", auth]
    : typeof headers.entries === "function"
      ? [...headers.entries()].flat().concat(["authorization", auth])
      : { ...headers, authorization: auth };
  return dispatch({ ...options, headers: added }, handler);
};
setGlobalDispatcher(new Agent().compose(addAuth));

const originalRequest = http.request;
http.request = function request(...args) {
  const req = originalRequest.apply(this, args);
  if (!req.getHeader("authorization")) req.setHeader("authorization", auth);
  return req;
};
