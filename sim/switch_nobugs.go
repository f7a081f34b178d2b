//go:build !simbugs

package sim

import "fmt"

// setSwitch fails: the switches exist only in a -tags simbugs build.
func setSwitch(name string) (func(), error) {
	return nil, fmt.Errorf("sim: mutation switch %s needs a build with -tags simbugs", name)
}
