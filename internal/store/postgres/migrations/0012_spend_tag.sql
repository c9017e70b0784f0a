-- Budget counters of one tag (a project), read when Redis has lost them
-- and the first admission of the tag rebuilds them (issue 15).
CREATE INDEX spend_tag_start ON spend (tag, start);
