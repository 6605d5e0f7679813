package cli

import (
	"fmt"
	"runtime"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/structs"
)

func versionCommand() *ucli.Command {
	return &ucli.Command{
		Name:   "version",
		Usage:  "print skein's version",
		Action: versionAction,
	}
}

func versionAction(c *ucli.Context) error {
	if _, err := cmdArgs(c); err != nil {
		return err
	}
	_, err := fmt.Fprintf(c.App.Writer, "skein %s\n%s %s/%s\n", structs.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
