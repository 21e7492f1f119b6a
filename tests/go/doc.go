// Package drivertest holds driver-compatibility tests that run the Apache
// Cassandra gocql v2 driver against a CQL server (Shoal or Apache Cassandra).
//
// All tests live in _test.go files; see README.md for how to run them.
package drivertest
