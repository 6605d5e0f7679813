package structs

// Version is the skein release; builds stamp it with -ldflags
// "-X github.com/skein-dev/skein/structs.Version=...".
var Version = "0.1.0-dev"
