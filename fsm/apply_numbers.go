package fsm

import (
	"cmp"
	"slices"

	"github.com/hashicorp/raft"
)

// applyJobNumbersStart turns job numbers on. Every job without a number
// gets one, in the order the jobs were made (an array's tasks by index),
// and an array the number of its first task; every job made later gets
// the next. A second start changes nothing. Numbers come from this entry
// rather than from the release that applies a submission, so that a
// cluster rolled from a release without them numbers its jobs alike on
// every node, whatever snapshot each restarted from.
func (s *state) applyJobNumbersStart(l *raft.Log) any {
	if s.jobNumbersOn {
		return nil
	}
	s.jobNumbersOn = true
	var jobs []string
	for id, j := range s.jobs {
		if j.Number == 0 {
			jobs = append(jobs, id)
		}
	}
	slices.SortFunc(jobs, func(a, b string) int {
		ja, jb := s.jobs[a], s.jobs[b]
		return cmp.Or(cmp.Compare(ja.CreateIndex, jb.CreateIndex), cmp.Compare(ja.ArrayIndex, jb.ArrayIndex), cmp.Compare(a, b))
	})
	for _, id := range jobs {
		j := s.jobs[id]
		j.Number = s.nextJobNumber()
		j.ModifyIndex = l.Index
		s.numberJobs[j.Number] = id
		if j.ArrayID != "" && j.ArrayNumber == 0 { // its first task: they come in order
			for _, t := range s.arrayTasks[j.ArrayID] {
				t.ArrayNumber = j.Number
			}
			s.arrayNumbers[j.Number] = j.ArrayID
		}
	}
	return nil
}
