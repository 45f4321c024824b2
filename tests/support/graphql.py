"""The Dagster GraphQL documents the tests and benchmarks send to a running webserver: launching
a partition backfill as the UI does, and reading its status and runs."""

LAUNCH_BACKFILL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
  }
}
"""

BACKFILL_RUNS = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill { status runs { runId status } }
    ... on PythonError { message }
  }
}
"""
