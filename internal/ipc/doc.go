// Package ipc is the agents' only door to the daemon: JSON files an agent's
// nanoclaw MCP server writes into <dataDir>/ipc/<folder>/{messages,tasks}/
// (their format is internal/protocol's). It holds the run tokens that prove
// which group wrote a file, the authorizer, and the watcher that carries
// out each file exactly once, with its effects, or quarantines it in
// <dataDir>/ipc/errors/.
package ipc
