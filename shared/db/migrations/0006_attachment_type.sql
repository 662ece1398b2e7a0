-- One attachment type for type: and the attachment_type facet (issue 11): a PDF sent as
-- application/octet-stream was found by type:pdf (filename) and counted as "other" by the facet.
-- New rows get the kind from shared/mail/attachment_types.py at ingest; this fills older rows
-- with the same rules (content type, then filename extension in any case, then magic bytes of the
-- first 4,096 bytes). tests/shared/mail/test_attachment_types.py re-runs the UPDATE below and
-- compares it with the Python function. Owner: shared/mail/store.py.
ALTER TABLE attachments ADD COLUMN IF NOT EXISTS attachment_type text;

UPDATE attachments SET attachment_type = CASE
    WHEN content_type IN ('application/pdf', 'application/x-pdf', 'application/acrobat') THEN 'pdf'
    WHEN content_type = 'application/msword' THEN 'doc'
    WHEN content_type IN ('application/vnd.openxmlformats-officedocument.wordprocessingml.document',
                          'application/vnd.openxmlformats-officedocument.wordprocessingml.template',
                          'application/vnd.ms-word.document.macroenabled.12') THEN 'docx'
    WHEN content_type = 'application/vnd.ms-excel' THEN 'xls'
    WHEN content_type IN ('application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
                          'application/vnd.openxmlformats-officedocument.spreadsheetml.template',
                          'application/vnd.ms-excel.sheet.macroenabled.12') THEN 'xlsx'
    WHEN content_type IN ('text/calendar', 'application/ics') THEN 'calendar'
    WHEN content_type IN ('application/zip', 'application/x-zip-compressed', 'application/x-zip')
        THEN 'zip'
    WHEN content_type = 'text/plain' THEN 'text'
    WHEN content_type = 'text/html' THEN 'html'
    WHEN content_type LIKE 'image/%' THEN 'image'
    WHEN lower(substring(filename from '\.([^.]*)$')) = 'pdf' THEN 'pdf'
    WHEN lower(substring(filename from '\.([^.]*)$')) IN ('doc', 'dot') THEN 'doc'
    WHEN lower(substring(filename from '\.([^.]*)$')) IN ('docx', 'docm', 'dotx') THEN 'docx'
    WHEN lower(substring(filename from '\.([^.]*)$')) IN ('xls', 'xlt') THEN 'xls'
    WHEN lower(substring(filename from '\.([^.]*)$')) IN ('xlsx', 'xlsm', 'xltx') THEN 'xlsx'
    WHEN lower(substring(filename from '\.([^.]*)$')) IN ('png', 'jpg', 'jpeg', 'gif', 'bmp', 'tif',
                                                            'tiff', 'webp', 'heic', 'heif', 'svg')
        THEN 'image'
    WHEN lower(substring(filename from '\.([^.]*)$')) IN ('ics', 'vcs') THEN 'calendar'
    WHEN lower(substring(filename from '\.([^.]*)$')) = 'zip' THEN 'zip'
    WHEN lower(substring(filename from '\.([^.]*)$')) = 'txt' THEN 'text'
    WHEN lower(substring(filename from '\.([^.]*)$')) IN ('html', 'htm') THEN 'html'
    WHEN substring(content from 1 for 5) = '\x255044462d'::bytea THEN 'pdf'
    WHEN substring(content from 1 for 8) = '\x89504e470d0a1a0a'::bytea THEN 'image'
    WHEN substring(content from 1 for 3) = '\xffd8ff'::bytea THEN 'image'
    WHEN substring(content from 1 for 4) = '\x47494638'::bytea THEN 'image'
    WHEN substring(content from 1 for 15) = '\x424547494e3a5643414c454e444152'::bytea THEN 'calendar'
    WHEN substring(content from 1 for 4) = '\x504b0304'::bytea THEN CASE
        WHEN position('\x776f72642f'::bytea IN substring(content from 1 for 4096)) > 0 THEN 'docx'
        WHEN position('\x786c2f'::bytea IN substring(content from 1 for 4096)) > 0 THEN 'xlsx'
        ELSE 'zip' END
    ELSE 'other' END;

ALTER TABLE attachments ALTER COLUMN attachment_type SET NOT NULL;
