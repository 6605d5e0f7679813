// Package archtest holds the test that keeps skein's package dependencies
// pointing the way docs/architecture.md, "Packages and who may import
// whom", says they must.
package archtest
