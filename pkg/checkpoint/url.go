package checkpoint

import "net/url"

// StepURL is where one checkpoint of this job lives, for status and logs.
// The step goes into the URL's path, before any query such as ?region=.
func (s *Store) StepURL(step int64) string {
	u, err := url.Parse(s.url)
	if err != nil {
		return s.url + stepDir(step)
	}
	u.Path += stepDir(step)
	return u.String()
}
