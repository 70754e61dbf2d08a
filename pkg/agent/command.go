package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// resolveWorkdir is where the trainer runs: workdir when set, absolute or
// relative to base, else def. It must be a directory that exists: the
// job's code is put on the instance by its image, not by refuel.
func resolveWorkdir(workdir, base, def string) (string, error) {
	if workdir == "" {
		return def, nil
	}
	dir := workdir
	switch {
	case strings.ContainsRune(dir, 0):
		return "", fmt.Errorf("workdir %q holds a NUL byte", workdir)
	case filepath.IsAbs(dir):
	case !filepath.IsLocal(dir):
		return "", fmt.Errorf("workdir %q leaves the node agent's directory %s: give an absolute path, or one below that directory without ..", workdir, base)
	default:
		dir = filepath.Join(base, dir)
	}
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("workdir %s: %w: the job's code must be there on the instance (in its image), or workdir fixed", dir, unwrapPath(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workdir %s is not a directory", dir)
	}
	return dir, nil
}

// resolveCommand finds the program of argv[0] as the trainer's own shell
// would: a name with a slash is a path, relative to the workdir; a bare
// name is looked up on the trainer's PATH (env), not the agent's.
// Relative PATH entries are skipped, as os/exec does, so nothing runs
// just because it lies in the workdir.
func resolveCommand(name string, env []string, workdir string) (string, error) {
	if name == "" {
		return "", errors.New("command: the program name (command[0]) is empty")
	}
	if strings.Contains(name, "/") {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(workdir, path)
		}
		err := executable(path)
		switch {
		case err != nil && path != name:
			return "", fmt.Errorf("command %s (%s in the workdir): %w", name, path, err)
		case err != nil:
			return "", fmt.Errorf("command %s: %w", name, err)
		}
		return path, nil
	}
	pathEnv := lookupEnv(env, "PATH")
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if path := filepath.Join(dir, name); executable(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("command %q is not on the trainer's PATH (%s): install it on the instance, give its path, or set PATH in the job's env", name, pathEnv)
}

// executable reports why path cannot be run, or nil.
func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return unwrapPath(err)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("%s is not executable (chmod +x it, or run it through its interpreter)", path)
	}
	return nil
}

// unwrapPath drops the path an *fs.PathError repeats, since the
// messages here name the path themselves.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
