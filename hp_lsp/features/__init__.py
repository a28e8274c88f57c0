"""One module per LSP feature. Each holds pure service functions (testable without a client) and a thin
handler the server registers."""
