// Package parity holds differential tests: where the product computes what
// Cluster API computes without importing Cluster API's controllers (which
// would triple the guard's binary), these tests hold the two equal over
// every input that matters, with Cluster API's own code as the reference.
package parity
