package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Pace is one S3 prefix's delete schedule, shared by every process that
// deletes under it (the delete function's concurrent invocations): a GCRA
// schedule (TAT: when the key deletions booked so far are spent) and the
// rate the fleet last agreed on after a SlowDown (Rate and CutAt; zero Rate:
// never cut, the pacer's ceiling applies).
type Pace struct {
	TAT   time.Time
	Rate  float64
	CutAt time.Time
}

// paceTTL: an idle prefix's record expires a day after its last booking.
const paceTTL = 24 * time.Hour

func paceKey(prefix string) (string, string) { return "PACE#" + prefix, "PACE" }

func micros(t time.Time) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMicro(), 10)}
}

func paceOf(item map[string]ddbtypes.AttributeValue) Pace {
	var p Pace
	n := func(name string) (float64, bool) {
		v, ok := item[name].(*ddbtypes.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		f, err := strconv.ParseFloat(v.Value, 64)
		return f, err == nil
	}
	if v, ok := n("tat"); ok {
		p.TAT = time.UnixMicro(int64(v))
	}
	if v, ok := n("rate"); ok {
		p.Rate = v
	}
	if v, ok := n("cut_at"); ok {
		p.CutAt = time.UnixMicro(int64(v))
	}
	return p
}

// GetPace reads a prefix's schedule (the zero Pace when it has none).
func (s *Store) GetPace(ctx context.Context, prefix string) (Pace, error) {
	pk, sk := paceKey(prefix)
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Pace{}, err
	}
	return paceOf(res.Item), nil
}

// ReservePace books d of a prefix's schedule (the caller's key count over
// its rate) and returns the record after the booking: the caller's slot
// starts at TAT - d. A schedule still ahead of now grows by d (one
// conditional ADD-like update, no read); an idle one restarts at now. Either
// way one write, and bookings by concurrent processes never overlap.
func (s *Store) ReservePace(ctx context.Context, prefix string, d time.Duration, now time.Time) (Pace, error) {
	pk, sk := paceKey(prefix)
	exp := &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(paceTTL).Unix(), 10)}
	dv := &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(d.Microseconds(), 10)}
	for attempt := 0; ; attempt++ {
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: key(pk, sk),
			UpdateExpression:          aws.String("SET tat = tat + :d, expires_at = :exp"),
			ConditionExpression:       aws.String("tat >= :now"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":d": dv, ":exp": exp, ":now": micros(now)},
			ReturnValues:              ddbtypes.ReturnValueAllNew,
		})
		if err == nil {
			return paceOf(out.Attributes), nil
		}
		if !conditionFailed(err) {
			return Pace{}, err
		}
		out, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: key(pk, sk),
			UpdateExpression:          aws.String("SET tat = :end, expires_at = :exp"),
			ConditionExpression:       aws.String("attribute_not_exists(tat) OR tat < :now"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":end": micros(now.Add(d)), ":exp": exp, ":now": micros(now)},
			ReturnValues:              ddbtypes.ReturnValueAllNew,
		})
		if err == nil {
			return paceOf(out.Attributes), nil
		}
		// Another process moved the schedule past now in between: append.
		if !conditionFailed(err) || attempt >= 8 {
			return Pace{}, err
		}
	}
}

// CutPace sets a prefix's rate after a SlowDown, unless the record moved on
// from seen (the caller's view: another process cut it since) or was cut
// less than cooldown ago. It reports whether this call cut, and the record
// as it is now either way.
func (s *Store) CutPace(ctx context.Context, prefix string, seen Pace, rate float64, now time.Time, cooldown time.Duration) (bool, Pace, error) {
	pk, sk := paceKey(prefix)
	vals := map[string]ddbtypes.AttributeValue{
		":r":   &ddbtypes.AttributeValueMemberN{Value: strconv.FormatFloat(rate, 'f', 3, 64)},
		":now": micros(now),
		":exp": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(paceTTL).Unix(), 10)},
	}
	cond := "attribute_not_exists(cut_at)"
	if !seen.CutAt.IsZero() {
		cond = "cut_at = :seen AND cut_at < :since"
		vals[":seen"] = micros(seen.CutAt)
		vals[":since"] = micros(now.Add(-cooldown))
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(pk, sk),
		UpdateExpression:                    aws.String("SET rate = :r, cut_at = :now, expires_at = :exp"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeValues:           vals,
		ReturnValues:                        ddbtypes.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return true, paceOf(out.Attributes), nil
	}
	if conditionFailed(err) {
		var ccf *ddbtypes.ConditionalCheckFailedException
		if errors.As(err, &ccf) && ccf.Item != nil {
			return false, paceOf(ccf.Item), nil
		}
		p, gerr := s.GetPace(ctx, prefix)
		return false, p, gerr
	}
	return false, Pace{}, err
}
