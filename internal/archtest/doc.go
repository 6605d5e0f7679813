// Package archtest holds the test that keeps skein's package dependencies
// pointing the way DESIGN.md §2 says they must.
package archtest
