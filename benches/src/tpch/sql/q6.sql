-- TPC-H Q6 with the specification's validation parameters, derived from TPC-H
-- query 6 under the terms of the TPC Fair Use Policy.
select
    sum(l_extendedprice * l_discount) as revenue
from
    lineitem
where
        l_shipdate >= date '1994-01-01'
  and l_shipdate < date '1995-01-01'
  and l_discount between 0.06 - 0.01 and 0.06 + 0.01
  and l_quantity < 24
