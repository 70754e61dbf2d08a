package training

import (
	"strconv"
	"strings"
	"time"

	"refuel/workflows"
	"refuel/workflows/workload"

	"go.temporal.io/sdk/workflow"
)

// ShowDetails keeps what the Web UI shows as the run's current details
// up to date: its phase, progress, instance, cost, and what it met.
func (r *run) ShowDetails(ctx workflow.Context) {
	workflow.SetCurrentDetails(ctx, r.details(workflow.Now(ctx))+r.estimateDetails(ctx))
}

// details is the run now, as markdown a person reads at a glance.
func (r *run) details(now time.Time) string {
	st := r.RunRecord
	ended := st.State == workflows.StateCompleted || st.State == workflows.StateFailed || st.State == workflows.StateCancelled
	var lines []string
	head := "**" + string(st.State) + "**"
	if r.Paused && st.State != workflows.StatePaused {
		head += " (pausing)"
	}
	if st.TotalSteps > 0 {
		head += " · step " + strconv.FormatInt(st.Step, 10) + " of " + strconv.FormatInt(st.TotalSteps, 10) +
			" (" + strconv.FormatInt(100*st.Step/max(1, st.TotalSteps), 10) + "%)"
	} else if st.Step > 0 {
		head += " · step " + strconv.FormatInt(st.Step, 10)
	}
	spent := workload.Dollars(r.Ledger.CostUSD(now)) + " spent"
	if r.spec.BudgetUSD > 0 {
		spent += " of " + workload.Dollars(r.spec.BudgetUSD)
	}
	lines = append(lines, head+" · "+spent)
	lines = append(lines, "team "+r.spec.Team+" · tier "+string(r.spec.Tier)+" · priority "+strconv.Itoa(st.Priority)+
		" · "+r.spec.Work.String()+" of work"+deadline(r))
	if r.Nodes() > 1 {
		gang := "gang of " + strconv.Itoa(r.Nodes()) + " nodes"
		if r.spec.Resources.Elastic() {
			gang += " (elastic down to " + strconv.Itoa(r.spec.Resources.MinNodeCount()) + ", training on " + strconv.Itoa(r.NodesNow()) + ")"
		}
		lines = append(lines, gang+" · "+strconv.Itoa(st.NodeReplacements)+" replaced while the others waited")
		for rank, l := range r.Gang() {
			lines = append(lines, "rank "+strconv.Itoa(rank)+" on "+workload.OfferingPlace(l.Offering())+" ("+l.Instance.ID+", "+
				workload.Dollars(l.Offering().PricePerHour)+"/h) since "+l.Since.UTC().Format("15:04:05")+" UTC")
		}
	} else if l := r.Lease; l != nil {
		lines = append(lines, "on "+workload.OfferingPlace(l.Offering())+" ("+l.Instance.ID+", "+workload.Dollars(l.Offering().PricePerHour)+"/h) since "+
			l.Since.UTC().Format("15:04:05")+" UTC · attempt "+strconv.Itoa(l.Attempt))
	}
	if why := r.marketWhy(); why != "" {
		lines = append(lines, "market: "+why)
	}
	if until := st.WaitingUntil; until != nil && st.State == workflows.StateWaiting {
		lines = append(lines, "waits out "+st.WaitingOn+" until "+until.UTC().Format("15:04:05")+" UTC, then tries its offerings again")
	}
	if a := r.Seat().Admission(); a != nil && a.Queued && !ended {
		lines = append(lines, "queued with the capacity pool: the "+workflows.PoolWorkflowID+" workflow's details say why each request waits")
	}
	if p := r.Pool; p != nil && p.Grant != nil {
		where := "burst pool " + p.Grant.Pool
		if p.Grant.Node != "" {
			where = "base machine " + p.Grant.Node
		}
		lines = append(lines, "granted "+where+" by the capacity pool")
		if p.Why != "" && r.Lease == nil {
			lines = append(lines, "waiting: "+p.Why)
		}
	}
	lines = append(lines, "preemptions "+strconv.Itoa(st.Preemptions)+" · recoveries "+strconv.Itoa(st.Recoveries)+
		" · restarts "+strconv.Itoa(st.Restarts.Total())+" · lost work "+time.Duration(st.LostWorkSecs*float64(time.Second)).Round(time.Second).String())
	fs, so := workload.FoldStockOuts(st.Failures, st.StockOuts)
	if so != nil && !ended {
		lines = append(lines, so.Line(" UTC"))
	}
	// A run that ended shows only the failure that ended it, if any, and
	// no longer what it may acquire.
	if n := len(fs); n > 0 && (!ended || st.State == workflows.StateFailed) {
		f := fs[n-1]
		lines = append(lines, "last failure: "+f.Class+" on "+f.Offering+": "+f.Message)
	}
	if n := len(r.Offerings); n > 0 && !ended {
		names := make([]string, 0, min(n, 4))
		for _, o := range r.Offerings[:min(n, 4)] {
			names = append(names, workload.OfferingPlace(o)+" "+workload.Dollars(o.PricePerHour)+"/h")
		}
		more := ""
		if n > 4 {
			more = ", and " + strconv.Itoa(n-4) + " more"
		}
		lines = append(lines, "may acquire: "+strings.Join(names, ", ")+more)
	}
	return strings.Join(lines, "  \n")
}

func deadline(r *run) string {
	if r.spec.Deadline == nil {
		return ""
	}
	return " by " + r.spec.Deadline.UTC().Format("2006-01-02 15:04 UTC")
}

// marketWhy is the run's latest market decision, explained.
func (r *run) marketWhy() string {
	_, why := r.Market.Status()
	return why
}
