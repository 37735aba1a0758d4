"""Azure Blob Storage change feed (``$blobchangefeed``) → Delta."""
