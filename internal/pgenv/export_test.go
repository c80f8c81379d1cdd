package pgenv

// ScramVerifierWith exposes the verifier with a chosen salt, to compare it
// with PostgreSQL's own.
var ScramVerifierWith = scramVerifierWith
