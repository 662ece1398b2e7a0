"""Search over one or more mailboxes (spec sections 4.3 and 6.1, DESIGN.md section 4).

Where things happen:

- ``query`` parses the Pylota Mail query language of ``mail_search`` (the ``q`` argument) into an
  AST of frozen Structs and renders it back as the canonical string echoed in responses. It is pure:
  no I/O, no time zone and no clock; a bad query raises ``invalid_request`` naming ``q``.
- Later modules run the AST: they apply the tenant's time zone to ``after:``/``before:`` dates, match
  operators against stored mail, and rank keyword, semantic and hybrid results.
"""

__all__: list[str] = []
