// Package doccheck holds the test that keeps every reference between the
// repository's files true: each Markdown link to a file of the repository,
// and each path to a Markdown file (with, perhaps, one of its headings in
// quotes after a comma, or its anchor after a #) named in a Go comment, a Markdown document or the Makefile, must name a
// file and a heading that exist; and no text may point at a design
// document outside the repository or at an issue by its number. The rule
// is written out in docs/development.md, "References between files".
package doccheck
