"""`redact` hides every password form a user may put in a database URL or DSN (issue 19)."""

from __future__ import annotations

import pytest

from seams.resources.database import redact

SECRET = "Pw LEAK-6 tail"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password='Pw LEAK-6 tail'", "password=***"),
        ("host=h password='Pw LEAK-6 tail' user=u", "host=h password=*** user=u"),
        ("host=h PASSWORD = \"Pw LEAK-6 tail\" dbname=d", "host=h PASSWORD = *** dbname=d"),
        ("password='it\\'s Pw LEAK-6 tail' sslmode=require", "password=*** sslmode=require"),
        ("password='Pw LEAK-6 tail", "password=***"),  # unterminated: hidden to the end
        ("host=h password=PwLEAK-6 user=u", "host=h password=*** user=u"),
        ("postgresql://u:pw@h:5/d", "postgresql://u:***@h:5/d"),
        ("postgres://:pw@h/d", "postgres://:***@h/d"),
        ("postgresql+psycopg2://u:p%40ss@h/d", "postgresql+psycopg2://u:***@h/d"),
        ("postgresql://u:p@ss/wo#rd@h/d?x=1", "postgresql://u:***@h/d?x=1"),  # unencoded
        ("postgresql://h/d?password=pw&sslmode=require", "postgresql://h/d?password=***&sslmode=require"),
        ("postgresql://h/d?sslpassword=pw", "postgresql://h/d?sslpassword=***"),
        ("PGPASSWORD=pw psql -h h", "PGPASSWORD=*** psql -h h"),
        (
            "cannot connect to postgresql://a:one@h/d (also tried postgresql://b:two@g/d)",
            "cannot connect to postgresql://a:***@h/d (also tried postgresql://b:***@g/d)",
        ),
        # Nothing to hide: unchanged.
        ("postgresql://postgres:@/seams?host=/tmp/x", "postgresql://postgres:@/seams?host=/tmp/x"),
        ("postgresql://a@h:5/d", "postgresql://a@h:5/d"),
        ("host=h user=u dbname=d", "host=h user=u dbname=d"),
    ],
)  # fmt: skip
def test_redact_hides_every_password_form(text: str, expected: str) -> None:
    assert redact(text) == expected
    for word in ("LEAK", "pw", "one", "two", "p%40ss"):
        if word in text and word not in expected:
            assert word not in redact(text)
